#!/usr/bin/env python3
"""Write a deterministic source-like tree (no downloads) for the benchmarks.

gen_tree.py DIR [--files N] [--dirs D] [--seed S]

Default: 282 files, about 3.6 MB, in nested directories (D: one per 12
files, at most 5 levels deep): C sources and headers, Python, Markdown,
JSON, a few binary blobs. Same arguments, same bytes. Every text file
contains the word BENCHTOKEN a few times (grep target). Needs only the
Python standard library: the outbound benchmarks run it inside the sandbox.
"""
import argparse
import os
import random

WORDS = ("static int void struct return const char size_t if else for while "
         "buffer length offset node cache spool backend window upload read "
         "write list stat errno goto out free malloc memcpy path name").split()

KINDS = [  # (extension, weight, writer kind)
    (".c", 30, "c"), (".h", 15, "c"), (".py", 15, "py"), (".md", 10, "md"),
    (".json", 8, "json"), (".txt", 8, "md"), (".bin", 4, "bin"),
]


def size_for(rng):
    r = rng.random()
    if r < 0.55:
        return rng.randint(300, 6000)
    if r < 0.85:
        return rng.randint(6000, 24000)
    if r < 0.985:
        return rng.randint(20000, 40000)
    return rng.randint(80000, 200000)


def text(rng, kind, size):
    out, n, line_no = [], 0, 0
    while n < size:
        line_no += 1
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 11)))
        if line_no % 97 == 0:
            words += " BENCHTOKEN"
        if kind == "c":
            line = f"\t{words};" if line_no % 5 else f"/* {words} */"
        elif kind == "py":
            line = f"    {words.replace(' ', '_')} = {line_no}"
        elif kind == "json":
            line = f'  "k{line_no}": "{words}",'
        else:
            line = words
        out.append(line)
        n += len(line) + 1
    return ("\n".join(out) + "\n").encode()[:size]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=282)
    ap.add_argument("--dirs", type=int, default=0,
                    help="directories to choose from (default: files / 12)")
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    dirs = [""]
    for i in range(a.dirs or max(4, a.files // 12)):
        parent = rng.choice(dirs)
        if parent.count("/") < 4:
            dirs.append(os.path.join(parent, f"d{i:02d}_{rng.choice(WORDS)}"))
    exts = [k for k in KINDS for _ in range(k[1])]
    total, used = 0, set()
    for i in range(a.files):
        ext, _, kind = rng.choice(exts)
        rel = rng.choice(dirs)
        used.update(rel[:k] for k in range(len(rel) + 1) if k == len(rel) or rel[k] == "/")
        d = os.path.join(a.dir, rel)
        os.makedirs(d, exist_ok=True)
        size = size_for(rng)
        data = (rng.randbytes(size) if kind == "bin" else text(rng, kind, size))
        with open(os.path.join(d, f"f{i:03d}_{rng.choice(WORDS)}{ext}"), "wb") as f:
            f.write(data)
        total += len(data)
    levels = 1 + max(r.count("/") + 1 for r in used if r) if len(used) > 1 else 1
    print(f"{a.files} files, {total} bytes, {len(dirs)} dirs, {len(used)} made, "
          f"{levels} levels")


if __name__ == "__main__":
    main()
