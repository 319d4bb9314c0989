#!/usr/bin/env python3
"""List the public declarations of Transfer and its other library modules
(TransferTerminal and the integrations) that have no
doc comment. Exit 1 (and print file:line: name for each) when any is missing.

  scripts/doc-coverage.py               build the symbol graphs, then check
  scripts/doc-coverage.py --graphs DIR  check graphs already built in DIR
  scripts/doc-coverage.py --count       print only the number missing

How: `swift build -Xswiftc -emit-symbol-graph` writes one JSON symbol graph per
module (and one per extended module, e.g. Transfer@Swift). We read every
symbol whose accessLevel is public or open.

The rule, decided here so that it is the same for everyone:
- A declaration counts as documented when it has a `///` (or `/** */`)
  comment of its own.
- Overrides and protocol witnesses are not counted: the compiler gives them
  the comment of what they override or implement, so the reader sees that
  comment. We know them by an `overrides` or `defaultImplementationOf`
  relationship, a `memberOf` relationship with a `sourceOrigin` (the
  requirement it implements), or a docComment from another module. If
  the overridden or required declaration is ours and undocumented, that one
  is counted instead.
- Members the compiler synthesises (`::SYNTHESIZED::` identifiers: protocol
  extension members inherited by a type, `==` of Equatable, ...) are not
  declarations in our sources and are not counted.
- Only declarations located in the Sources/ folders of MODULES are counted (a graph also lists what a module re-exports from C headers).
- Enum cases count: each case is a public declaration a user reads.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

MODULES = ("Transfer", "TransferFoundation", "TransferTerminal", "TransferHTTPTypes", "TransferOpenAPI", "TransferMetrics",
           "TransferTracing", "TransferServiceLifecycle")
# The targets to build so that every module above has its graph.
BUILD_TARGETS = ("TransferFoundation", "TransferTerminal", "TransferOpenAPI", "TransferMetrics", "TransferTracing",
                 "TransferServiceLifecycle")
SOURCES = tuple("Sources/%s/" % m for m in MODULES)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_graphs(out):
    for target in BUILD_TARGETS:
        cmd = ["swift", "build", "--target", target,
               "-Xswiftc", "-emit-symbol-graph",
               "-Xswiftc", "-emit-symbol-graph-dir", "-Xswiftc", out]
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout)
            sys.exit("doc-coverage: the build failed")


def graph_files(d):
    files = []
    for m in MODULES:
        files += glob.glob(os.path.join(d, m + ".symbols.json"))
        files += glob.glob(os.path.join(d, m + "@*.symbols.json"))
    return sorted(files)


def inherits_doc(sym, relations):
    """True for overrides and witnesses: their comment comes from elsewhere."""
    pid = sym["identifier"]["precise"]
    if relations.get(pid):
        return True
    doc = sym.get("docComment")
    if doc and doc.get("module") and doc["module"] != sym.get("_module"):
        return True
    return False


def missing(files):
    found = {}
    for f in files:
        g = json.load(open(f))
        module = g["module"]["name"]
        relations = {}
        for rel in g.get("relationships", []):
            # sourceOrigin on a memberOf edge: the member implements a
            # protocol requirement (a witness) or is inherited from one.
            if rel["kind"] in ("overrides", "defaultImplementationOf") \
                    or rel.get("sourceOrigin"):
                relations[rel["source"]] = True
        for s in g["symbols"]:
            if s.get("accessLevel") not in ("public", "open"):
                continue
            pid = s["identifier"]["precise"]
            if "::SYNTHESIZED::" in pid:
                continue
            s["_module"] = module
            doc = s.get("docComment")
            own = doc and doc.get("module", module) == module and any(
                l.get("text", "").strip() for l in doc.get("lines", []))
            if own or inherits_doc(s, relations):
                continue
            loc = s.get("location", {})
            path = loc.get("uri", "").replace("file://", "")
            path = os.path.relpath(path, ROOT) if path else ""
            if not path.startswith(SOURCES):
                continue  # re-exported or imported, not declared by us
            line = loc.get("position", {}).get("line", -1) + 1
            name = ".".join(s.get("pathComponents", [])) or s["names"]["title"]
            found[pid] = (path, line, s["kind"]["identifier"], name)
    return sorted(found.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", help="directory of symbol graphs already built")
    ap.add_argument("--count", action="store_true")
    a = ap.parse_args()
    if a.graphs:
        files = graph_files(a.graphs)
    else:
        tmp = tempfile.mkdtemp(prefix="doc-coverage-")
        build_graphs(tmp)
        files = graph_files(tmp)
    if not files:
        sys.exit("doc-coverage: no symbol graphs for %s" % ", ".join(MODULES))
    miss = missing(files)
    if a.count:
        print(len(miss))
    else:
        for path, line, kind, name in miss:
            print("%s:%d: %s %s has no doc comment" % (path, line, kind, name))
        print("doc-coverage: %d public declarations without a doc comment"
              % len(miss))
    return 1 if miss else 0


if __name__ == "__main__":
    sys.exit(main())
