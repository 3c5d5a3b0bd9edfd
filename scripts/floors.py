#!/usr/bin/env python3
# Issue 13 item 8, "floors that only point down": moves the modules of src/ to their floor with `git mv` and rewrites
# every relative path that names a moved file. Re-runnable and idempotent; run from the repo root: python3 scripts/floors.py
"""Moves src modules to their floor and rewrites the relative paths that name them.

Floors, lowest first: Domain (with Domain/Rules) < Services < Layers < Programs < Workspace < Cli < entry points;
src/Testing/ holds the test-only layers that `runtime-resume/test` re-exports.

What it does, in order:
  1. fixed moves (below): the pure ledger rules into src/Domain/Rules/, the two store helpers the layers need
     into src/Services/, the program-composing layers into src/Workspace/, the test-only layers into src/Testing/;
  2. derived moves: every src/Programs module that (after step 1) imports src/Layers or src/Workspace moves to
     src/Workspace/ (repeated to a fixed point);
  3. rewrites, in every source file of src/ test/ harness/ bench/ bin/ examples/ scripts/ and the root configs:
     a. every quoted relative path ("./x.js", "../src/Layers/X.ts", new URL("..", import.meta.url), ...) that
        resolves to a moved file is recomputed from the importing file's new location; every relative path inside
        a moved file is recomputed from its new location (directories included);
     b. every remaining text "src/<old path>" (repo-root paths in strings, JSON file lists, docs) gets the new path.
  4. prints the floor violations that remain in src/ (test/Floors.test.ts fails on them).
A file that is already where it belongs is left alone, so a second run changes nothing.
Options: --dry-run (print the plan, change nothing).
"""
import os
import re
import subprocess
import sys

# Fixed moves: old path -> new path (skipped when the old path no longer exists).
RULES = ["LedgerRules", "RunVerifier", "AppendCheck", "ToolProjection"]
TEST_ONLY = ["CrashConsistentFileSystem", "ScriptedModelProvider", "CapturingTracer", "TestWorkspaceLock",
             "ScriptedLanguageModel"]
FIXED = {}
for name in RULES:
    FIXED[f"src/Programs/{name}.ts"] = f"src/Domain/Rules/{name}.ts"
# Needed by the stores (Layers) and by Services/RuntimeEventStore; they depend on Domain and Services types only.
FIXED["src/Programs/ScanRuns.ts"] = "src/Services/ScanRuns.ts"
FIXED["src/Programs/WorkspaceIdentity.ts"] = "src/Services/WorkspaceIdentity.ts"
# Layers that are built from programs (a host composed of DurableTurn, StartupRepair, ...): above Programs.
FIXED["src/Layers/AiHost.ts"] = "src/Workspace/AiHost.ts"
FIXED["src/Layers/LanguageModelProvider.ts"] = "src/Workspace/LanguageModelProvider.ts"
# The AiHost service's interface is made of program types (HostStartup, DurableTurn, EventBuilder): above Programs.
FIXED["src/Services/AiHost.ts"] = "src/Workspace/AiHostService.ts"
for name in TEST_ONLY:
    FIXED[f"src/Layers/{name}.ts"] = f"src/Testing/{name}.ts"
# Explicitly named workspace-level programs (their kin are found in step 2).
for name in ["RepairWorkspace", "ResumeWorkspace"]:
    FIXED[f"src/Programs/{name}.ts"] = f"src/Workspace/{name}.ts"

ROOTS = ["src", "test", "harness", "bench", "bin", "examples", "scripts"]
CODE_EXT = (".ts", ".mts", ".cts", ".tsx", ".mjs", ".cjs", ".js")
SKIP_DIRS = {"node_modules", "dist", ".git", "coverage"}

# A quoted string without interpolation whose text starts with ./ or ../ (or is . or ..).
REL_STRING = re.compile(r"""(?P<q>["'`])(?P<spec>\.{1,2}(?:/[^"'`$\s\\]*)?)(?P=q)""")


def run_git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True)


def walk_files():
    files = []
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for f in sorted(filenames):
                if f.endswith(CODE_EXT) and not f.endswith(".d.ts"):
                    files.append(os.path.normpath(os.path.join(dirpath, f)))
    for f in sorted(os.listdir(".")):
        if os.path.isfile(f) and f.endswith(CODE_EXT):
            files.append(f)
    return files


def text_files():
    """Files that only get the repo-root path rewrite (3b): configs and docs."""
    out = []
    for f in sorted(os.listdir(".")):
        if os.path.isfile(f) and (f.endswith(".json") or f.endswith(".md")) and f != "package-lock.json":
            out.append(f)
    for root in ["docs", ".ci"]:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and d != "api")
            for f in sorted(filenames):
                if f.endswith((".md", ".json", ".sh")) or "." not in f:
                    out.append(os.path.normpath(os.path.join(dirpath, f)))
    return out


def split_ext(spec):
    for ext in (".d.ts", ".mts", ".cts", ".tsx", ".ts", ".mjs", ".cjs", ".js"):
        if spec.endswith(ext):
            return spec[: -len(ext)], ext
    return spec, ""


def resolve(from_file, spec, existing, url=False):
    """The repo path a relative specifier of from_file names: (path, kind) with kind 'file' or 'dir', or None.
    A bare ".", "..", "./" or "../" names a directory, and only as the first argument of `new URL(…, import.meta.url)`
    (elsewhere it is just a string, e.g. a path-segment check)."""
    p = os.path.normpath(os.path.join(os.path.dirname(from_file), spec))
    if re.fullmatch(r"(\.\.?/?)+", spec) or spec.endswith("/"):
        return (p, "dir") if url and os.path.isdir(p) else None
    stem, ext = split_ext(p)
    candidates = []
    if ext == ".js":
        candidates = [stem + ".ts", stem + ".tsx", p]
    elif ext == ".mjs":
        candidates = [stem + ".mts", p]
    elif ext == ".cjs":
        candidates = [stem + ".cts", p]
    elif ext:
        candidates = [p]
    else:
        candidates = [p + ".ts", p + "/index.ts", p]
    for c in candidates:
        if c in existing:
            return c, "file"
    if url and os.path.isdir(p):
        return p, "dir"
    return None


def relative(from_new_file, target_new, tail):
    r = os.path.relpath(target_new, os.path.dirname(from_new_file) or ".").replace(os.sep, "/")
    if r == ".":
        return "." + tail if tail else "."
    if not r.startswith("."):
        r = "./" + r
    return r + tail


def imports_of(path, existing):
    """Resolved relative file targets of a source file."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    out = set()
    for m in REL_STRING.finditer(text):
        res = resolve(path, m.group("spec"), existing)
        if res and res[1] == "file":
            out.add(res[0])
    return out


def floor_of(path):
    parts = path.split("/")
    if parts[0] != "src":
        return None
    if len(parts) == 2:
        return "Testing" if parts[1] == "Testing.ts" else "Entry"
    return parts[1]


RANK = {"Domain": 0, "Services": 1, "Layers": 2, "Programs": 3, "Workspace": 4, "Cli": 5, "Console": 5, "Entry": 6, "Testing": 7}


def main():
    dry = "--dry-run" in sys.argv
    if not os.path.isdir("src") or not os.path.isdir(".git") and not os.path.isfile(".git"):
        sys.exit("floors.py: run it from the repo root (no src/ or .git here)")
    files = walk_files()
    existing = set(files)

    # 1. fixed moves that still apply.
    moves = {}
    for old, new in FIXED.items():
        if old in existing:
            if os.path.exists(new):
                sys.exit(f"floors.py: both {old} and {new} exist; merge them by hand, then re-run")
            moves[old] = new

    # 2. derived moves: programs above Layers.
    graph = {f: imports_of(f, existing) for f in files if f.startswith("src/")}
    changed = True
    while changed:
        changed = False
        for f in sorted(graph):
            if not f.startswith("src/Programs/") or f in moves:
                continue
            for t in graph[f]:
                floor = floor_of(moves.get(t, t))
                if floor in ("Layers", "Workspace"):
                    new = "src/Workspace/" + f[len("src/Programs/"):]
                    if os.path.exists(new):
                        sys.exit(f"floors.py: {f} must move to {new}, which exists; resolve by hand")
                    moves[f] = new
                    print(f"derived: {f} imports {moves.get(t, t)} -> moves to {new}")
                    changed = True
                    break

    # 3a. relative paths.
    edits = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        f_new = moves.get(f, f)

        def repl(m, f=f, f_new=f_new):
            spec = m.group("spec")
            url = re.match(r"\s*,\s*import\.meta\.url", text[m.end():]) is not None
            res = resolve(f, spec, existing, url)
            if res is None:
                return m.group(0)
            target, kind = res
            if kind == "dir":
                if f_new == f:
                    return m.group(0)
                trailing = "/" if spec.endswith("/") and spec not in ("./", "../") else ""
                r = os.path.relpath(target, os.path.dirname(f_new)).replace(os.sep, "/")
                if spec.startswith("./") and not r.startswith("."):
                    r = "./" + r
                if spec == "./" or spec == "../" or spec.endswith("/"):
                    r = r + "/" if not r.endswith("/") else r
                else:
                    r = r + trailing
                return m.group("q") + r + m.group("q")
            t_new = moves.get(target, target)
            if f_new == f and t_new == target:
                return m.group(0)
            # keep the specifier's own extension style: replace only the stem.
            spec_stem, spec_ext = split_ext(spec)
            t_stem, _ = split_ext(t_new)
            if spec_ext == "" and target.endswith("/index.ts") and not spec_stem.endswith("index"):
                t_stem = os.path.dirname(t_new)
            return m.group("q") + relative(f_new, t_stem, spec_ext) + m.group("q")

        new_text = REL_STRING.sub(repl, text)
        if new_text != text:
            edits[f] = new_text

    # 3b. repo-root paths ("src/Layers/X.ts", "dist/esm/src/Layers/X.js", JSON lists, docs).
    def root_paths(text):
        for old, new in moves.items():
            old_stem, new_stem = old[:-3], new[:-3]
            text = re.sub(re.escape(old_stem) + r"(?=\.(?:d\.ts|ts|js|mjs|cjs|d\.ts\.map|js\.map)\b)", new_stem, text)
        return text

    for f in files:
        if f in edits:
            edits[f] = root_paths(edits[f])
        else:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            out = root_paths(text)
            if out != text:
                edits[f] = out
    doc_edits = {}
    for f in text_files():
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, IsADirectoryError):
            continue
        out = root_paths(text)
        if out != text:
            doc_edits[f] = out

    for old, new in sorted(moves.items()):
        print(f"move: {old} -> {new}")
    for f in sorted(set(edits) | set(doc_edits)):
        print(f"rewrite: {moves.get(f, f)}")
    if dry:
        return

    for old, new in sorted(moves.items()):
        os.makedirs(os.path.dirname(new), exist_ok=True)
        r = run_git("mv", old, new)
        if r.returncode != 0:
            os.rename(old, new)
    for f, text in {**edits, **doc_edits}.items():
        with open(moves.get(f, f), "w", encoding="utf-8") as fh:
            fh.write(text)

    # 4. what still points up.
    final = walk_files()
    fset = set(final)
    problems = []
    for f in final:
        a = floor_of(f)
        if a is None:
            continue
        for t in sorted(imports_of(f, fset)):
            b = floor_of(t)
            if b is None:
                continue
            if RANK[b] > RANK[a] or (a == "Programs" and b == "Layers"):
                problems.append(f"{f} ({a}) imports {t} ({b})")
    # The same deliberate exceptions as TESTING_EXCEPTIONS in test/Floors.test.ts.
    allowed = {"src/Ai.ts imports src/Testing/ScriptedLanguageModel.ts",
               "src/Cli/Resume.ts imports src/Testing/ScriptedModelProvider.ts"}
    for p in problems:
        key = re.sub(r" \(\w+\)", "", p)
        print(("allowed (see test/Floors.test.ts): " if key in allowed else "STILL POINTS UP: ") + p)
    if not moves and not edits and not doc_edits:
        print("floors.py: nothing to do")


if __name__ == "__main__":
    main()
