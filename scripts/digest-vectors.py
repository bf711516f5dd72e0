#!/usr/bin/env python3
"""Fixed digest vectors of the trace service, computed with Python's own json and hashlib.

Writes test/api/fixtures/trace-digests.json (or the path given as the first argument). The digests follow
trace-service.md: sha256, URL-safe base64 without padding, "-" -> "X", "_" -> "Y"; objects and rows hash
json.dumps(val, sort_keys=True); a table is the hex sha256 of its row digests concatenated; a file is the byte
digest of its content.

Each value is stored as the JSON text a client would send (json.dumps with ensure_ascii=False and the keys in
their original order), so the TypeScript side reads it back with the int/float distinction kept.

Run: python3 scripts/digest-vectors.py && npx biome format --write test/api/fixtures/trace-digests.json
"""

import base64
import hashlib
import json
import sys
from pathlib import Path


def bytes_digest(data: bytes) -> str:
    encoded = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return encoded.replace("-", "X").replace("_", "Y")


def str_digest(text: str) -> str:
    return bytes_digest(text.encode("utf-8"))


def value_vector(name, value):
    canonical = json.dumps(value, sort_keys=True)
    return {
        "name": name,
        "json": json.dumps(value, ensure_ascii=False),
        "dumps": canonical,
        "digest": str_digest(canonical),
    }


VALUES = [
    ("null", None),
    ("true", True),
    ("false", False),
    ("zero", 0),
    ("int", 42),
    ("negative int", -7),
    ("large int", 2**64 + 1),
    ("large negative int", -(2**63)),
    ("max safe int", 2**53 - 1),
    ("beyond safe int", 2**53 + 1),
    ("float 1.0", 1.0),
    ("float -0.0", -0.0),
    ("float 100.0", 100.0),
    ("float 0.1", 0.1),
    ("float 0.1 + 0.2", 0.1 + 0.2),
    ("float 1e-7", 1e-7),
    ("float 1e-5", 1e-5),
    ("float 0.0001", 0.0001),
    ("float 1.5e-05", 1.5e-05),
    ("float 1e15", 1e15),
    ("float 1e16", 1e16),
    ("float 1.5e16", 1.5e16),
    ("float 9999999999999998.0", 9999999999999998.0),
    ("float 1e22", 1e22),
    ("float 123456789.123", 123456789.123),
    ("float smallest subnormal", 5e-324),
    ("float max", 1.7976931348623157e308),
    ("float -2.5", -2.5),
    ("empty string", ""),
    ("ascii string", "hello world"),
    ("non-ascii latin", "héllo wörld"),
    ("cjk", "日本語のテキスト"),
    ("emoji", "grin 😀 and family 👨‍👩‍👧"),
    ("escapes", 'quote " backslash \\ slash / tab \t newline \n cr \r bs \b ff \f'),
    ("control and del", "\x00\x01\x1f\x7f\x80"),
    ("line separators", "a\u2028b\u2029c"),
    ("bmp edge", "\ufffe\uffff"),
    ("lone surrogate", "x\ud800y"),
    ("empty list", []),
    ("empty object", {}),
    ("list", [1, 2.0, "three", None, True, [], {}]),
    (
        "key order",
        {"b": 1, "a": 2, "B": 3, "_": 4, "10": 5, "9": 6, "aa": 7, "": 8},
    ),
    ("non-ascii keys", {"é": 1, "z": 2, "日本": 3, "\uffff": 4, "😀": 5, "\U0001f600a": 6}),
    (
        "nested",
        {
            "outer": {"z": [1, {"y": 1.0, "x": None}], "a": {"deep": {"deeper": ["ü", 1e-7, 10**20]}}},
            "list": [[[]], [{}], [{"k": "v"}]],
            "flag": False,
        },
    ),
    (
        "object value",
        {
            "_type": "Dataset",
            "_class_name": "Dataset",
            "_bases": ["Object", "BaseModel"],
            "name": "arithmetic-eval",
            "description": None,
            "rows": "weave:///entity/project/table/5a6b",
        },
    ),
    (
        "op value",
        {
            "_type": "CustomWeaveType",
            "weave_type": {"type": "Op"},
            "files": {"obj.py": "Zr0L3lmQYqKSqCpDBFbr4Bkm3vDGtfCQlnXlT6Ij3tU"},
        },
    ),
]

ROWS = [
    ("empty table", []),
    ("one row", [{"input": "2 + 2", "expected": 4}]),
    (
        "rows",
        [
            {"question": "What is 2+2?", "answer": 4, "score": 1.0},
            {"question": "Qu'est-ce que 3×3 ?", "answer": 9, "score": 0.5},
            {"question": "emoji 🎉", "answer": None, "tags": ["a", "b"], "meta": {"z": 1, "a": 2}},
        ],
    ),
]

FILES = [
    ("empty file", b""),
    ("text file", b"hello world\n"),
    ("all bytes", bytes(range(256))),
    ("utf-8 source", "def f(x):\n    return '😀' + x  # café\n".encode("utf-8")),
]


def table_vector(name, rows):
    row_digests = [str_digest(json.dumps(row, sort_keys=True)) for row in rows]
    hasher = hashlib.sha256()
    for digest in row_digests:
        hasher.update(digest.encode("utf-8"))
    return {
        "name": name,
        "rows": [json.dumps(row, ensure_ascii=False) for row in rows],
        "row_digests": row_digests,
        "digest": hasher.hexdigest(),
    }


def file_vector(name, data):
    return {"name": name, "base64": base64.b64encode(data).decode("ascii"), "digest": bytes_digest(data)}


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "test/api/fixtures/trace-digests.json"
    vectors = {
        "generator": "scripts/digest-vectors.py",
        "python": sys.version.split()[0],
        "values": [value_vector(name, value) for name, value in VALUES],
        "tables": [table_vector(name, rows) for name, rows in ROWS],
        "files": [file_vector(name, data) for name, data in FILES],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    # ensure_ascii=True keeps the file ASCII, and lone surrogates writable.
    out.write_text(json.dumps(vectors, indent=2) + "\n", encoding="ascii")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
