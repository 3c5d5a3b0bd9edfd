// The console's only static assets, held in memory: nothing is ever read from the file system by a request path.
// The script is optional: the pages work without it (filtering, validation and live updates are what it adds). They
// hold no workspace data, so they are served to any request on the console's own Host, token or not.

const CSS = `
*,*::before,*::after{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:8px 20px;display:flex;flex-wrap:wrap;gap:4px 16px;align-items:center}
header .brand{color:#fff;font-weight:600;text-decoration:none}.live{font-size:12px;color:#9fb3c8}
main{padding:12px 20px;max-width:1280px}h1{font-size:20px;margin:8px 0}h2{font-size:15px;margin:0 0 8px}h3{font-size:14px;margin:8px 0 4px}
h1,h2,h3,p,td,dd,li,label,legend,code,small{overflow-wrap:anywhere}
.panel{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 14px;margin:12px 0;min-width:0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}
th{font-weight:600;color:#555;font-size:12px}.num{text-align:right}.digest{font:11px monospace;color:#777;word-break:break-all}
.ok{color:#16794a}.bad{color:#b3261e}code{font-size:90%}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:400;color:#fff;background:#667;vertical-align:1px}
.d-pending{background:#8893a0}.unverified{color:#8a5a00}.d-blocked{background:#c25400}.d-safe_replay{background:#2264d1}.d-completed{background:#16794a}.d-corrupted,.d-corruption,.d-offset_mismatch,.d-indeterminate{background:#b3261e}
.s-completed,.s-abandoned,.s-continued{background:#16794a}.s-replayable,.s-awaiting_continuation{background:#2264d1}
.s-unsettled,.s-parked,.s-open_dead,.s-unmanaged,.s-open_live{background:#c25400}
.s-corrupt,.s-derived_mismatch,.s-offset_mismatch,.s-torn_tail,.s-unreadable_file{background:#b3261e}
.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:12px}.cols .panel{margin:0}
dl{display:grid;grid-template-columns:110px minmax(0,1fr);gap:4px 10px;margin:0}dt{color:#666}dd{margin:0}
.next p{margin:4px 0}.next .more,.here{font-size:12px;color:#555}
pre.cmd{margin:4px 0;padding:4px 8px;background:#f3f4f6;border-radius:4px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.timeline{background:#fbfcfd;border:1px solid #eef0f3;max-width:100%;height:auto}.axis{stroke:#99a;stroke-width:1}.tick,.lane{font:11px system-ui;fill:#556}
.bar{stroke:#0003}.bar.open{stroke-dasharray:4 3;stroke:#c25400;stroke-width:2}.dispatch{fill:#1d2330}.evtick{fill:#8893a0}.item:hover rect,.item:hover path{opacity:.75}
.succeeded{fill:#2e9d5b;background:#2e9d5b}.failed{fill:#d64541;background:#d64541}.indeterminate{fill:#f0a020;background:#f0a020}
.not-dispatched{fill:#9aa3ad;background:#9aa3ad}.parked{fill:#8e5cc2;background:#8e5cc2}
.settled-reconciler{fill:#149aa3;background:#149aa3}.settled-person{fill:#2f6fe0;background:#2f6fe0}
.bundle{stroke:#1d2330;stroke-width:1}.ms{stroke-width:1.5;stroke-dasharray:3 3}.ms-dot{stroke:none}
.ms-terminal{stroke:#b3261e;fill:#b3261e;background:#b3261e}.ms-recovery{stroke:#2f6fe0;fill:#2f6fe0;background:#2f6fe0}
.ms-continuation{stroke:#16794a;fill:#16794a;background:#16794a}.ms-opened{stroke:#99a;fill:#99a}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:4px 12px;padding:0;margin:8px 0 0;font-size:12px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-2px}
form.resolve{border-top:1px solid #eef0f3;padding-top:6px;margin-top:8px}label{display:block;margin:4px 0}
fieldset.choices{border:1px solid #eef0f3;border-radius:4px;margin:6px 0;padding:4px 8px}fieldset.choices label{margin:2px 0}
.call-args .label{margin:2px 0;font-size:12px;color:#555}
pre.args{margin:0;padding:6px 8px;background:#f3f4f6;border-radius:4px;font-size:12px;max-height:14em;overflow-y:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.help{font-size:12px;color:#555;margin:2px 0}
textarea.json{display:block;width:100%;font:12px monospace}textarea.invalid{outline:2px solid #b3261e}.jsonerr{color:#b3261e;margin:2px 0}
input.actor{max-width:100%}
button{background:#2264d1;color:#fff;border:0;border-radius:4px;padding:5px 12px;cursor:pointer;max-width:100%;overflow-wrap:anywhere}
.notice{padding:6px 10px;border-radius:4px;background:#fff4e0;border-left:4px solid #c25400}.notice.settled{background:#e8f3ec;border-left-color:#16794a}
.notice.error{background:#fbe9e7;border-left-color:#b3261e}
pre.event{background:#f3f4f6;padding:10px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
input[type=search]{width:320px;max-width:100%;padding:4px}
@media (max-width:800px){
  main{padding:8px 10px}header{padding:8px 10px}.panel{padding:10px}
  .cols{grid-template-columns:minmax(0,1fr)}
  dl{grid-template-columns:90px minmax(0,1fr)}
  table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:auto}
  table.stack thead{display:none}
  table.stack tr{border-bottom:1px solid #dde1e7;padding:6px 0}
  table.stack td{border:0;padding:2px 0;text-align:left}
  table.stack td[data-label]::before{content:attr(data-label) ": ";font-size:12px;font-weight:600;color:#555}
}
`

const JS = `
(function(){
  var q=document.getElementById('filter');
  if(q){q.addEventListener('input',function(){var v=q.value.toLowerCase();document.querySelectorAll('#runs tbody tr').forEach(function(tr){tr.hidden=v!==''&&(tr.getAttribute('data-filter')||'').indexOf(v)<0})})}
  var saved=localStorage.getItem('rr-actor')||'';
  document.querySelectorAll('input.actor').forEach(function(i){if(!i.value)i.value=saved});
  document.querySelectorAll('form.resolve').forEach(function(f){
    var ta=f.querySelector('textarea'),err=f.querySelector('.jsonerr');
    function choice(){var c=f.querySelector('input[name=choice]:checked');return c?c.value:''}
    function check(){if(choice()!=='edit'){ta.classList.remove('invalid');err.hidden=true;return true}
      if(ta.value.trim()===''){ta.classList.add('invalid');err.textContent='edit needs the result the model should see: type it as JSON';err.hidden=false;return false}
      try{JSON.parse(ta.value);ta.classList.remove('invalid');err.hidden=true;return true}catch(e){ta.classList.add('invalid');err.textContent='not valid JSON: '+e.message;err.hidden=false;return false}}
    ta.addEventListener('input',check);f.querySelectorAll('input[name=choice]').forEach(function(r){r.addEventListener('change',check)});
    f.addEventListener('submit',function(e){if(!check()){e.preventDefault();return}var a=f.querySelector('input.actor');if(a)localStorage.setItem('rr-actor',a.value)});
  });
  var watch=document.body.getAttribute('data-watch'),live=document.getElementById('live'),dirty=false;
  // A form a person has begun to fill is never thrown away by a reload: the page says the ledger changed instead.
  document.querySelectorAll('form.resolve').forEach(function(f){f.addEventListener('input',function(){dirty=true});f.addEventListener('change',function(){dirty=true})});
  if(watch){setInterval(function(){fetch('/api/state',{credentials:'same-origin'}).then(function(r){return r.json()}).then(function(s){
    if(s.watch!==watch){var a=document.activeElement;if(dirty||(a&&(a.tagName==='TEXTAREA'||a.tagName==='INPUT'))){live.textContent='the ledger changed: reload to see it';return}location.reload()}
    else live.textContent='live · up to date'}).catch(function(){live.textContent='console unreachable'})},1500)}
})();
`

/** The console's icon (an SVG: a circular arrow over a ledger line), served at /favicon.svg and /favicon.ico. */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d2330"/>` +
  `<path d="M16 7a9 9 0 1 1-8.5 6" fill="none" stroke="#f0a020" stroke-width="3" stroke-linecap="round"/>` +
  `<path d="M4 9l4 5 4-5z" fill="#f0a020"/><rect x="11" y="15" width="10" height="2.5" rx="1" fill="#fff"/></svg>`

/**
 * The console's assets by exact path; anything else is not an asset.
 *
 * @since 0.1.0
 * @category constants
 */
export const ASSETS: ReadonlyMap<string, { readonly body: string; readonly contentType: string }> = new Map([
  ["/assets/console.css", { body: CSS, contentType: "text/css; charset=utf-8" }],
  ["/assets/console.js", { body: JS, contentType: "text/javascript; charset=utf-8" }],
  ["/favicon.svg", { body: ICON, contentType: "image/svg+xml" }],
  ["/favicon.ico", { body: ICON, contentType: "image/svg+xml" }]
])
