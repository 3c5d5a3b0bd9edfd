// The console's only static assets, held in memory: nothing is ever read from the file system by a request path.
// The script is optional: the pages work without it (filtering, validation and live updates are what it adds).

const CSS = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:8px 20px;display:flex;gap:16px;align-items:center}
header a.brand{color:#fff;font-weight:600;text-decoration:none}.live{font-size:12px;color:#9fb3c8}
main{padding:12px 20px;max-width:1280px}h1{font-size:20px;margin:8px 0}h2{font-size:15px;margin:0 0 8px}h3{font-size:14px;margin:8px 0 4px}
.panel{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 14px;margin:12px 0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}
th{font-weight:600;color:#555;font-size:12px}.num{text-align:right}.digest{font:11px monospace;color:#777;word-break:break-all}
.ok{color:#16794a}.bad{color:#b3261e}code{font-size:90%}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;color:#fff;background:#667}
.d-pending{background:#8893a0}.unverified{color:#8a5a00}.d-blocked{background:#c25400}.d-safe_replay{background:#2264d1}.d-completed{background:#16794a}.d-corrupted,.d-offset_mismatch{background:#b3261e}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:12px}.cols .panel{margin:0}
dl{display:grid;grid-template-columns:110px 1fr;gap:4px 10px;margin:0}dt{color:#666}dd{margin:0}
.timeline{background:#fbfcfd;border:1px solid #eef0f3}.axis{stroke:#99a;stroke-width:1}.tick,.lane{font:11px system-ui;fill:#556}
.bar{stroke:#0003}.bar.open{stroke-dasharray:4 3;stroke:#c25400;stroke-width:2}.dispatch{fill:#1d2330}.evtick{fill:#8893a0}.item:hover rect,.item:hover path{opacity:.75}
.succeeded{fill:#2e9d5b;background:#2e9d5b}.failed{fill:#d64541;background:#d64541}.indeterminate{fill:#f0a020;background:#f0a020}
.not-dispatched{fill:#9aa3ad;background:#9aa3ad}.parked{fill:#8e5cc2;background:#8e5cc2}
.settled-reconciler{fill:#149aa3;background:#149aa3}.settled-person{fill:#2f6fe0;background:#2f6fe0}
.bundle{stroke:#1d2330;stroke-width:1}.ms{stroke-width:1.5;stroke-dasharray:3 3}.ms-dot{stroke:none}
.ms-terminal{stroke:#b3261e;fill:#b3261e;background:#b3261e}.ms-recovery{stroke:#2f6fe0;fill:#2f6fe0;background:#2f6fe0}
.ms-continuation{stroke:#16794a;fill:#16794a;background:#16794a}.ms-opened{stroke:#99a;fill:#99a}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:12px;padding:0;margin:8px 0 0;font-size:12px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-2px}
form.resolve{border-top:1px solid #eef0f3;padding-top:6px;margin-top:8px}label{display:block;margin:4px 0}
textarea.json{width:100%;font:12px monospace}textarea.invalid{outline:2px solid #b3261e}.jsonerr{color:#b3261e;margin:2px 0}
button{background:#2264d1;color:#fff;border:0;border-radius:4px;padding:5px 12px;cursor:pointer}
.notice{padding:6px 10px;border-radius:4px;background:#e8f3ec}.notice.error{background:#fbe9e7}
pre.event{background:#f3f4f6;padding:10px;overflow:auto;font-size:12px}input[type=search]{width:320px;padding:4px}
`

const JS = `
(function(){
  var q=document.getElementById('filter');
  if(q){q.addEventListener('input',function(){var v=q.value.toLowerCase();document.querySelectorAll('#runs tbody tr').forEach(function(tr){tr.hidden=v!==''&&(tr.getAttribute('data-filter')||'').indexOf(v)<0})})}
  var saved=localStorage.getItem('rr-actor')||'';
  document.querySelectorAll('input.actor').forEach(function(i){if(!i.value)i.value=saved});
  document.querySelectorAll('form.resolve').forEach(function(f){
    var ta=f.querySelector('textarea'),err=f.querySelector('.jsonerr'),ch=f.querySelector('select');
    function check(){if(ch.value!=='edit'){ta.classList.remove('invalid');err.hidden=true;return true}
      try{JSON.parse(ta.value);ta.classList.remove('invalid');err.hidden=true;return true}catch(e){ta.classList.add('invalid');err.textContent='not valid JSON: '+e.message;err.hidden=false;return false}}
    ta.addEventListener('input',check);ch.addEventListener('change',check);
    f.addEventListener('submit',function(e){if(!check()){e.preventDefault();return}var a=f.querySelector('input.actor');if(a)localStorage.setItem('rr-actor',a.value)});
  });
  var watch=document.body.getAttribute('data-watch'),live=document.getElementById('live');
  if(watch){setInterval(function(){fetch('/api/state',{credentials:'same-origin'}).then(function(r){return r.json()}).then(function(s){
    if(s.watch!==watch){if(document.activeElement&&document.activeElement.tagName==='TEXTAREA'){live.textContent='the ledger changed: reload to see it';return}location.reload()}
    else live.textContent='live · up to date'}).catch(function(){live.textContent='console unreachable'})},1500)}
})();
`

/** The console's assets by exact path; anything else is not an asset. */
export const ASSETS: ReadonlyMap<string, { readonly body: string; readonly contentType: string }> = new Map([
  ["/assets/console.css", { body: CSS, contentType: "text/css; charset=utf-8" }],
  ["/assets/console.js", { body: JS, contentType: "text/javascript; charset=utf-8" }]
])
