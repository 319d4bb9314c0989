#!/usr/bin/env python3
"""Counts the lines of code of each snippet of docs/ASYNC.md, for its table.

Counted: every line of a ```swift, ```swift alamofire or ```swift asynchttpclient
block. Not counted: blank lines, comment lines, `import` lines and one-line model
types (`struct User: Decodable ...`).

Usage: scripts/doc-line-counts.py   (from the repository root)
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = re.compile(r"struct \w+: (De|En|Co)codable")


def count(block):
    lines = [line.strip() for line in block.splitlines()]
    return sum(1 for line in lines
               if line and not line.startswith("//") and not line.startswith("import ") and not MODEL.match(line))


def main():
    text = (ROOT / "docs" / "ASYNC.md").read_text()
    totals = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0]
        found = re.findall(r"^```(swift(?: alamofire| asynchttpclient)?)\n(.*?)^```$", section, re.S | re.M)
        if not found:
            continue
        row = {lang: count(body) for lang, body in found}
        for lang, n in row.items():
            totals[lang] = totals.get(lang, 0) + n
        print(f"{title:55} " + "  ".join(f"{lang.split()[-1]}={n}" for lang, n in row.items()))
    print(f"{'total':55} " + "  ".join(f"{lang.split()[-1]}={n}" for lang, n in totals.items()))


if __name__ == "__main__":
    main()
