#!/usr/bin/env python3
"""Writes data/tokenizer/nfkc-code-points.txt: every code point whose NFKC form differs from itself,
as CPython's unicodedata.normalize computes it (an implementation independent of attnum's
nfc.cpp; the same Unicode version as the tables, see the file's first line), one per line:
"CP: X Y ..." in hex. Run from the repository root: /usr/bin/python3 tests/model/nfkc_oracle.py"""
import sys, unicodedata as ud

with open("data/tokenizer/nfkc-code-points.txt", "w") as f:
    f.write(f"# Python {sys.version.split()[0]}, Unicode {ud.unidata_version}\n")
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        k = ud.normalize("NFKC", chr(cp))
        if k != chr(cp):
            f.write(f"{cp:X}: {' '.join(f'{ord(c):X}' for c in k)}\n")
