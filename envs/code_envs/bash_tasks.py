"""Bash-v0's question and data families: count files, find a token, read logs, convert and aggregate
CSV. Each builder draws its folder names, file contents, numbers and the question from the RNG; the
answer or output file is compared on the host with values computed here (see `judge`).

The shell families (fix a script, repair permissions, git) are in `bash_ops`; `FAMILIES` lists all.
"""

from __future__ import annotations

import csv
import io
import random
import shlex
from collections import Counter
from collections.abc import Callable

from agentrl.code_envs import bash_ops
from agentrl.code_envs.judge import answer_is, json_file_equals
from agentrl.code_envs.tasks import Builder, Task, call
from agentrl.code_envs.vocab import EXTENSIONS, WORDS, slug, word, words
from agentrl.code_envs.workspace import files

LEVELS = ("INFO", "DEBUG", "WARN", "ERROR")
STATUSES = (401, 403, 404, 500, 503)


def _text(rng: random.Random, n_lines: int) -> str:
    return "".join(" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) + "\n" for _ in range(n_lines))


def count_files(rng: random.Random, split: str) -> Task:
    root, ext, min_size = slug(rng), rng.choice(EXTENSIONS), rng.randint(20, 160)
    tree: dict[str, str] = {}
    for _ in range(rng.randint(30, 60)):
        folder = "/".join(word(rng) for _ in range(rng.randint(0, 3)))
        suffix = ext if rng.random() < 0.4 else rng.choice(EXTENSIONS)
        name = f"{word(rng)}{rng.randint(0, 999)}.{suffix}" + (".bak" if rng.random() < 0.1 else "")
        tree[f"{root}/{folder}/{name}".replace("//", "/")] = "".join(
            rng.choices("abcdef \n", k=rng.randint(1, 300))
        )
    expected = sum(p.endswith(f".{ext}") and len(c) > min_size for p, c in tree.items())
    return Task(
        "count_files",
        f"How many files with the extension .{ext} that are larger than {min_size} bytes are there under "
        f"the directory {root}/ (at any depth)? Answer with the number only.",
        files(tree),
        answer_is(expected),
        (
            call("execute_bash", command=f"find {root} -type f -name '*.{ext}' -size +{min_size}c | wc -l"),
            call("finish", answer=str(expected)),
        ),
        answer=str(expected),
    )


def find_token(rng: random.Random, split: str) -> Task:
    root = slug(rng)
    token = f"{rng.choice(('KEY', 'TOKEN', 'REF', 'ID'))}-{rng.randint(10**7, 10**8 - 1)}"
    paths = sorted({f"{root}/{word(rng)}/{word(rng)}{i}.txt" for i in range(rng.randint(20, 40))})
    target = rng.choice(paths)
    tree = {}
    for p in paths:
        lines = _text(rng, rng.randint(5, 40)).splitlines()
        # near misses elsewhere: the token with one more digit, or another token of the same shape
        decoy = (
            f"{token}{rng.randint(0, 9)}" if rng.random() < 0.3 else f"{token[:-3]}{rng.randint(100, 999)}x"
        )
        lines.insert(rng.randrange(len(lines) + 1), f"the access {token if p == target else decoy} is here")
        tree[p] = "\n".join(lines) + "\n"
    return Task(
        "find_token",
        f"Exactly one file under {root}/ contains the exact word {token}. Which one? Answer with its path "
        f"relative to the workspace (like {root}/a/b.txt).",
        files(tree),
        answer_is(target, path=True),
        (call("execute_bash", command=f"grep -rlw -- {token} {root}"), call("finish", answer=target)),
        answer=target,
    )


def log_errors(rng: random.Random, split: str) -> Task:
    services, level, path = words(rng, 5), rng.choice(("ERROR", "WARN")), f"logs/{slug(rng, '-')}.log"
    service = rng.choice(services)
    lines, expected = [], 0
    for i in range(rng.randint(200, 400)):
        lvl, svc = rng.choice(LEVELS), rng.choice(services)
        expected += lvl == level and svc == service
        # messages may mention levels and services too, so matching the whole line is wrong
        note = f"after {rng.choice(LEVELS)} from {rng.choice(services)}" if rng.random() < 0.2 else word(rng)
        lines.append(
            f"2024-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00 {lvl} [{svc}] req {i} {note}\n"
        )
    old = path.replace(".log", ".1.log")
    return Task(
        "log_errors",
        f"{path} has one event per line: timestamp, level, [service], message. How many {level} events did "
        f"the service '{service}' log in that file? Answer with the number only.",
        files({path: "".join(lines), old: f"2023-01-01T00:00:00 {level} [{service}] old\n"}),
        answer_is(expected),
        (
            call("execute_bash", command=f"grep -c ' {level} \\[{service}\\] ' {path}"),
            call("finish", answer=str(expected)),
        ),
        answer=str(expected),
    )


def log_top_ip(rng: random.Random, split: str) -> Task:
    path, status, day = f"logs/{slug(rng, '-')}-access.log", rng.choice(STATUSES), rng.randint(1, 28)
    ips = [
        f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        for _ in range(rng.randint(8, 14))
    ]
    weights = [rng.randint(1, 20) for _ in ips]
    lines, counts = [], Counter()
    for _ in range(rng.randint(400, 700)):
        ip, code, d = (
            rng.choices(ips, weights)[0],
            rng.choice((200, 200, 301, status, *STATUSES)),
            rng.randint(1, 28),
        )
        counts[ip] += code == status and d == day
        lines.append(f'{ip} - - [{d:02d}/Mar/2024:10:00:00 +0000] "GET /{word(rng)} HTTP/1.1" {code} 512\n')
    ranked = [*counts.most_common(2), (ips[0], 0), (ips[1], 0)]
    (top, n), (_, m) = ranked[0], ranked[1]
    if n == m:  # make the winner unique
        lines.append(f'{top} - - [{day:02d}/Mar/2024:23:59:59 +0000] "GET /x HTTP/1.1" {status} 512\n')
    awk = (
        f"awk '$9 == {status} && $4 ~ /^\\[{day:02d}\\/Mar/ {{print $1}}' {path} "
        "| sort | uniq -c | sort -rn | head -3"
    )
    return Task(
        "log_top_ip",
        f"{path} is a web server access log (common log format). Which client IP address received the most "
        f"{status} responses on {day} March 2024? Answer with the IP address only.",
        files({path: "".join(lines)}),
        answer_is(top),
        (call("execute_bash", command=awk), call("finish", answer=top)),
        answer=top,
    )


STRING_COLUMNS = ("name", "city", "team", "color", "tag", "owner")
INT_COLUMNS = ("age", "score", "rank", "count", "year", "level")


def csv_to_json(rng: random.Random, split: str) -> Task:
    text_cols, int_cols = (
        rng.sample(STRING_COLUMNS, rng.randint(1, 3)),
        rng.sample(INT_COLUMNS, rng.randint(1, 2)),
    )
    columns: list[str] = rng.sample(text_cols + int_cols, len(text_cols) + len(int_cols))
    rows = [
        {
            c: (f"{word(rng).title()} {word(rng).title()}" if c in text_cols else rng.randint(-50, 2000))
            for c in columns
        }
        for _ in range(rng.randint(6, 25))
    ]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    src, out = f"data/{slug(rng)}.csv", f"out/{word(rng)}.json"
    script = (
        f"import csv,json,os; rows=[{{k: int(v) if k in {sorted(int_cols)!r} else v for k, v in r.items()}} "
        f"for r in csv.DictReader(open({src!r}))]; os.makedirs('out', exist_ok=True); "
        f"json.dump(rows, open({out!r}, 'w'))"
    )
    keys = ", ".join(f"{c} ({'integer' if c in int_cols else 'string'})" for c in columns)
    return Task(
        "csv_to_json",
        f"Convert {src} into {out}: a JSON array with one object per row, in row order, with the keys "
        f"{keys}. "
        "Then call finish.",
        files({src: buffer.getvalue()}),
        json_file_equals(out, rows),
        (call("execute_bash", command=f"python3 -c {shlex.quote(script)}"), call("finish", answer="")),
    )


AGGREGATES: dict[str, Callable[[list[int]], int]] = {"sum": sum, "max": max, "min": min, "count": len}


def csv_aggregate(rng: random.Random, split: str) -> Task:
    key = rng.choice(("region", "store", "team", "branch", "zone"))
    value = rng.choice(("amount", "units", "revenue", "qty"))
    op = rng.choice(tuple(AGGREGATES))
    groups = words(rng, rng.randint(3, 6))
    rows = [(rng.choice(groups), word(rng), rng.randint(1, 500)) for _ in range(rng.randint(30, 80))]
    by_group: dict[str, list[int]] = {}
    for group, _, amount in rows:
        by_group.setdefault(group, []).append(amount)
    expected = {g: AGGREGATES[op](v) for g, v in by_group.items()}
    src, out = f"{word(rng)}_sales.csv", f"{word(rng)}_totals.json"
    text = f"{key},product,{value}\n" + "".join(f"{g},{p},{a}\n" for g, p, a in rows)
    script = (
        f"import csv,json; g={{}}; [g.setdefault(r[{key!r}], []).append(int(r[{value!r}])) for r in "
        f"csv.DictReader(open({src!r}))]; "
        f"json.dump({{k: {'len' if op == 'count' else op}(v) for k, v in g.items()}}, "
        f"open({out!r}, 'w'))"
    )
    what = "the number of its rows" if op == "count" else f"the {op} of its {value} values"
    return Task(
        "csv_aggregate",
        f"{src} lists sales ({key}, product, {value}). Write {out}: a JSON object mapping each {key} to "
        f"{what} "
        "(an integer). Then call finish.",
        files({src: text}),
        json_file_equals(out, expected),
        (call("execute_bash", command=f"python3 -c {shlex.quote(script)}"), call("finish", answer="")),
    )


FAMILIES: dict[str, Builder] = {
    "count_files": count_files,
    "find_token": find_token,
    "log_errors": log_errors,
    "log_top_ip": log_top_ip,
    "csv_to_json": csv_to_json,
    "csv_aggregate": csv_aggregate,
    **bash_ops.FAMILIES,
}
