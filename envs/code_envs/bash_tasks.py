"""Bash-v0's task families: files, logs, data, scripts, permissions and git, each with seeded variants."""

from __future__ import annotations

import csv
import io
import shlex
from collections import Counter
from collections.abc import Callable

from agentrl.code_envs.tasks import (
    Task,
    all_of,
    answer_is,
    call,
    json_file_equals,
    shell_prints,
    variant_rng,
)
from agentrl.code_envs.workspace import WorkspaceFile, files

VARIANTS = 9
WORDS = (
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "gable",
    "heron",
    "iris",
    "juniper",
    "kelp",
    "lumen",
    "maple",
    "nectar",
    "onyx",
    "pixel",
    "quartz",
    "raven",
    "sable",
    "tundra",
)
EXTENSIONS = ("txt", "log", "csv", "py", "md", "json")
SERVICES = ("auth", "billing", "search", "gateway", "mailer")
LEVELS = ("INFO", "DEBUG", "WARN", "ERROR")


def count_files(variant: int) -> Task:
    rng = variant_rng("count_files", variant)
    tree: dict[str, str] = {}
    for _ in range(rng.randint(25, 45)):
        depth = rng.randint(0, 3)
        folder = "/".join(rng.choice(WORDS) for _ in range(depth))
        name = f"{rng.choice(WORDS)}{rng.randint(0, 99)}.{rng.choice(EXTENSIONS)}"
        tree["data/" + (folder + "/" if folder else "") + name] = f"{rng.random()}\n"
    ext = rng.choice(EXTENSIONS)
    expected = sum(1 for p in tree if p.endswith("." + ext))
    return Task(
        f"count_files/{variant}",
        "count_files",
        f"How many files with the extension .{ext} are there under the directory data/ (at any depth)? "
        "Answer with the number only.",
        files(tree),
        answer_is(expected),
        (
            call("execute_bash", command=f"find data -type f -name '*.{ext}' | wc -l"),
            call("finish", answer=str(expected)),
        ),
    )


def find_token(variant: int) -> Task:
    rng = variant_rng("find_token", variant)
    token = f"KEY-{rng.randint(10**7, 10**8 - 1)}"
    paths = sorted({f"docs/{rng.choice(WORDS)}/{rng.choice(WORDS)}{i}.txt" for i in range(30)})
    target = rng.choice(paths)
    tree = {}
    for p in paths:
        lines = [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(rng.randint(5, 40))]
        if p == target:
            lines.insert(rng.randrange(len(lines)), f"the access {token} is here")
        else:
            lines.insert(
                rng.randrange(len(lines)), f"the access KEY-{rng.randint(10**7, 10**8 - 1)}x is here"
            )
        tree[p] = "\n".join(lines) + "\n"
    return Task(
        f"find_token/{variant}",
        "find_token",
        f"Exactly one file under docs/ contains the exact word {token}. Which one? Answer with its path "
        "relative to the workspace (like docs/a/b.txt).",
        files(tree),
        answer_is(target, path=True),
        (call("execute_bash", command=f"grep -rlw {token} docs"), call("finish", answer=target)),
    )


def _log(rng, n: int) -> list[tuple[str, str, str]]:
    return [
        (
            f"2024-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
            rng.choice(LEVELS),
            rng.choice(SERVICES),
        )
        for _ in range(n)
    ]


def log_errors(variant: int) -> Task:
    rng = variant_rng("log_errors", variant)
    rows = _log(rng, rng.randint(200, 400))
    service = rng.choice(SERVICES)
    text = "".join(
        f"{t} {lvl} [{svc}] request {i} {rng.choice(WORDS)}\n" for i, (t, lvl, svc) in enumerate(rows)
    )
    expected = sum(1 for _, lvl, svc in rows if lvl == "ERROR" and svc == service)
    return Task(
        f"log_errors/{variant}",
        "log_errors",
        f"logs/app.log has one event per line: timestamp, level, [service], message. How many ERROR events "
        f"did the service '{service}' log? Answer with the number only.",
        files({"logs/app.log": text, "logs/old/app.log.1": "2023-01-01T00:00:00 ERROR [auth] old\n"}),
        answer_is(expected),
        (
            call("execute_bash", command=f"grep -c ' ERROR \\[{service}\\] ' logs/app.log"),
            call("finish", answer=str(expected)),
        ),
    )


def log_top_ip(variant: int) -> Task:
    rng = variant_rng("log_top_ip", variant)
    ips = [f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}" for _ in range(12)]
    weights = list(range(1, 13))
    rng.shuffle(weights)
    lines, counts = [], Counter()
    for _ in range(500):
        ip = rng.choices(ips, weights)[0]
        status = rng.choice((200, 200, 200, 301, 404, 500))
        counts[ip] += status == 404
        lines.append(
            f'{ip} - - [12/Mar/2024:10:00:00 +0000] "GET /{rng.choice(WORDS)} HTTP/1.1" {status} 512\n'
        )
    (top, n), (_, m) = counts.most_common(2)
    if n == m:  # make the winner unique
        lines.append(f'{top} - - [12/Mar/2024:10:00:01 +0000] "GET /x HTTP/1.1" 404 512\n')
    return Task(
        f"log_top_ip/{variant}",
        "log_top_ip",
        "logs/access.log is a web server access log (common log format). Which client IP address received "
        "the most 404 responses? Answer with the IP address only.",
        files({"logs/access.log": "".join(lines)}),
        answer_is(top),
        (
            call(
                "execute_bash",
                command="awk '$9 == 404 {print $1}' logs/access.log | sort | uniq -c | sort -rn | head -3",
            ),
            call("finish", answer=top),
        ),
    )


def _people(rng) -> list[dict]:
    return [
        {
            "name": f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()}",
            "age": rng.randint(18, 90),
            "city": rng.choice(("Oslo", "Lima", "Pune", "Kyiv", "Quito", "Turin")),
        }
        for _ in range(rng.randint(8, 20))
    ]


CONVERT = (
    "python3 -c \"import csv,json; rows=[dict(r, age=int(r['age'])) for r in csv.DictReader(open('{src}'))]; "
    "import os; os.makedirs('out', exist_ok=True); json.dump(rows, open('out/people.json','w'))\""
)


def csv_to_json(variant: int) -> Task:
    rng = variant_rng("csv_to_json", variant)
    people = _people(rng)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, ["name", "age", "city"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(people)
    src = f"data/{rng.choice(WORDS)}.csv"
    return Task(
        f"csv_to_json/{variant}",
        "csv_to_json",
        f"Convert {src} into out/people.json: a JSON array with one object per row, in row order, with keys "
        "name (string), age (integer) and city (string). Then call finish.",
        files({src: buffer.getvalue()}),
        json_file_equals("out/people.json", people),
        (call("execute_bash", command=CONVERT.format(src=src)), call("finish", answer="")),
    )


def csv_aggregate(variant: int) -> Task:
    rng = variant_rng("csv_aggregate", variant)
    regions = rng.sample(("north", "south", "east", "west", "central", "coast"), rng.randint(3, 5))
    rows = [(rng.choice(regions), rng.choice(WORDS), rng.randint(1, 500)) for _ in range(rng.randint(30, 80))]
    totals: dict[str, int] = {}
    for region, _, amount in rows:
        totals[region] = totals.get(region, 0) + amount
    text = "region,product,amount\n" + "".join(f"{r},{p},{a}\n" for r, p, a in rows)
    script = (
        "import csv,json,collections; t=collections.Counter(); "
        "[t.update({r['region']: int(r['amount'])}) for r in csv.DictReader(open('sales.csv'))]; "
        "json.dump(dict(t), open('totals.json','w'))"
    )
    return Task(
        f"csv_aggregate/{variant}",
        "csv_aggregate",
        "sales.csv lists sales (region, product, amount). Write totals.json: a JSON object mapping each "
        "region "
        "to the sum of its amounts (integers). Then call finish.",
        files({"sales.csv": text}),
        json_file_equals("totals.json", totals),
        (call("execute_bash", command=f"python3 -c {shlex.quote(script)}"), call("finish", answer="")),
    )


GOOD_SCRIPT = """#!/usr/bin/env bash
# Line counts of every input file, one "name count" line each, sorted by name.
set -euo pipefail
out=report.txt
: > "$out"
for f in input/*.txt; do
    n=$(wc -l < "$f")
    echo "$(basename "$f" .txt) $n" >> "$out"
done
"""
BUGS = (
    ("for f in input/*.txt; do", "for f in input/*.text; do"),
    ('n=$(wc -l < "$f")', 'n=$(wc -l < "$file")'),
    ('    echo "$(basename "$f" .txt) $n" >> "$out"\ndone', '    echo "$(basename "$f" .txt) $n" >> "$out"'),
    ('>> "$out"', '> "$out"'),
)


def fix_script(variant: int) -> Task:
    rng = variant_rng("fix_script", variant)
    names = sorted(rng.sample(WORDS, rng.randint(3, 6)))
    tree = {f"input/{n}.txt": "".join(f"line {i}\n" for i in range(rng.randint(1, 30))) for n in names}
    old, new = BUGS[variant % len(BUGS)]
    broken = GOOD_SCRIPT.replace(old, new)
    # The checker adds a file the agent never saw, so a hard-coded report cannot pass.
    extra = f"zz{rng.randint(100, 999)}"
    expected = "\n".join([*(f"{n} {tree[f'input/{n}.txt'].count(chr(10))}" for n in names), f"{extra} 2"])
    check_cmd = (
        f"printf 'a\\nb\\n' > input/{extra}.txt && rm -f report.txt && bash scripts/report.sh "
        ">/dev/null 2>&1; cat report.txt; rm -f input/{extra}.txt"
    )
    return Task(
        f"fix_script/{variant}",
        "fix_script",
        "scripts/report.sh should write report.txt: for every input/*.txt file, a line 'NAME COUNT' "
        "(file name without .txt, its number of lines), sorted by name. Run from the workspace as "
        "`bash scripts/report.sh`, it does not work. Fix the script (keep it general: it must work for "
        "any files in input/), then finish.",
        {**files(tree), "scripts/report.sh": WorkspaceFile(broken, 0o755)},
        shell_prints(check_cmd, expected),
        (
            call("write_file", path="scripts/report.sh", content=GOOD_SCRIPT),
            call("execute_bash", command="bash scripts/report.sh && cat report.txt"),
            call("finish", answer=""),
        ),
    )


def permissions(variant: int) -> Task:
    rng = variant_rng("permissions", variant)
    tree: dict[str, WorkspaceFile] = {}
    for n in rng.sample(WORDS, rng.randint(2, 4)):
        tree[f"bin/{n}.sh"] = WorkspaceFile(f"#!/bin/sh\necho {n}\n", rng.choice((0o644, 0o600, 0o744)))
    for n in rng.sample(WORDS, rng.randint(1, 3)):
        tree[f"secrets/{n}.key"] = WorkspaceFile(f"{rng.random()}\n", rng.choice((0o644, 0o666, 0o664)))
    for n in rng.sample(WORDS, rng.randint(2, 4)):
        tree[f"public/{n}.html"] = WorkspaceFile("<p>hi</p>\n", rng.choice((0o666, 0o646, 0o644)))
    expected = "\n".join(
        f"{755 if p.startswith('bin/') else 600 if p.startswith('secrets/') else 644} {p}"
        for p in sorted(tree)
    )
    return Task(
        f"permissions/{variant}",
        "permissions",
        "Repair the permissions in the workspace: every bin/*.sh must have mode 755, every "
        "secrets/*.key mode "
        "600, and every public/* file mode 644. Then finish.",
        tree,
        shell_prints("find bin secrets public -type f -exec stat -c '%a %n' {} + | sort -k2", expected),
        (
            call(
                "execute_bash", command="chmod 755 bin/*.sh && chmod 600 secrets/*.key && chmod 644 public/*"
            ),
            call("finish", answer=""),
        ),
    )


GIT_SETUP = (
    "git init -q -b main . && git config user.name dev && git config user.email dev@example.invalid && "
    "git fast-import --quiet && git reset -q --hard main"
)


def _history(commits: list[tuple[str, dict[str, str]]]) -> str:
    """A `git fast-import` stream of `commits` (subject, full tree): one process builds the whole
    repository, with fixed dates so the commit hashes are the same on every run."""

    def data(text: str) -> str:
        return f"data {len(text.encode())}\n{text}\n"

    out = []
    for subject, tree in commits:
        out.append("commit refs/heads/main\n")
        out.append("author dev <dev@example.invalid> 1704067200 +0000\n")
        out.append("committer dev <dev@example.invalid> 1704067200 +0000\n")
        out.append(data(subject))
        for path, content in sorted(tree.items()):
            out.append(f"M 100644 inline {path}\n" + data(content))
    return "".join(out)


def git_ops(variant: int) -> Task:
    rng = variant_rng("git_ops", variant)
    token = f"limit={rng.randint(100, 999)}"
    subjects = [f"Tune {rng.choice(WORDS)} {i}" for i in range(rng.randint(4, 7))]
    culprit = rng.randrange(1, len(subjects))
    config, commits = "# settings\n", []
    for i, subject in enumerate(subjects):
        config += (token if i == culprit else f"option{i}={rng.randint(0, 9)}") + "\n"
        commits.append((subject, {"src/config.txt": config, "README.md": "project\n"}))
    setup, history = GIT_SETUP, _history(commits)
    base = {"src/config.txt": "# settings\n", "README.md": "project\n"}
    kind = variant % 3
    if kind == 0:
        return Task(
            f"git_ops/{variant}",
            "git_ops",
            f"The workspace is a git repository. Which commit added the line '{token}' to src/config.txt? "
            "Answer with that commit's subject line.",
            files(base),
            answer_is(subjects[culprit]),
            (
                call("execute_bash", command=f"git log -S {shlex.quote(token)} --format=%s"),
                call("finish", answer=subjects[culprit]),
            ),
            setup=setup,
            setup_stdin=history,
        )
    if kind == 1:
        branch = f"feature/{rng.choice(WORDS)}"
        note = f"notes/{rng.choice(WORDS)}.txt"
        message = f"Add {note}"
        return Task(
            f"git_ops/{variant}",
            "git_ops",
            f"The workspace is a git repository. Create a branch named {branch} from main and commit the "
            f"untracked file {note} on it, with the commit message '{message}'. Leave main unchanged.",
            files({**base, note: f"{rng.random()}\n"}),
            all_of(
                shell_prints(f"git log -1 --format=%s {branch}", message),
                shell_prints(f"git ls-tree -r --name-only {branch} -- {note}", note),
                shell_prints("git log -1 --format=%s main", subjects[-1]),
            ),
            (
                call(
                    "execute_bash",
                    command=f"git checkout -q -b {branch} && git add {note} && "
                    f"git commit -q -m {shlex.quote(message)}",
                ),
                call("finish", answer=""),
            ),
            setup=setup,
            setup_stdin=history,
        )
    return Task(
        f"git_ops/{variant}",
        "git_ops",
        "The workspace is a git repository with uncommitted edits to src/config.txt and README.md. Discard "
        "all uncommitted changes to tracked files so the working tree matches the last commit, then finish.",
        files(base),
        shell_prints("git status --porcelain --untracked-files=no | wc -l", "0"),
        (call("execute_bash", command="git checkout -- . && git status --short"), call("finish", answer="")),
        setup=setup + " && echo junk >> src/config.txt && echo more >> README.md",
        setup_stdin=history,
    )


FAMILIES: dict[str, Callable[[int], Task]] = {
    f.__name__: f
    for f in (
        count_files,
        find_token,
        log_errors,
        log_top_ip,
        csv_to_json,
        csv_aggregate,
        fix_script,
        permissions,
        git_ops,
    )
}
TASK_IDS: tuple[str, ...] = tuple(f"{family}/{v}" for family in FAMILIES for v in range(VARIANTS))


def get_task(task_id: str) -> Task:
    family, _, variant = task_id.partition("/")
    if family not in FAMILIES or not variant.isdigit():
        raise KeyError(f"unknown Bash-v0 task {task_id!r}")
    return FAMILIES[family](int(variant))
