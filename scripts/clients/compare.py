"""Compares runs of the external clients, bare driver against SoftPreempt.

    compare.py pytest OUT.md LABEL BARE.xml SP.xml [LABEL BARE.xml SP.xml ...]
        pyopencl's suite: one JUnit XML per run. A test is named by its module and its
        name with the platform taken out of the parametrisation (the context factory and
        platform objects print the platform's name, which differs by construction), so the
        same test on both platforms has the same name. BARE.xml may end in
        `@module,module...`: only the bare results of those test modules are compared (a
        SoftPreempt run of part of the suite). Any test that passed on the bare
        driver and did not pass through SoftPreempt (failed, errored, skipped or missing) is
        a regression: all are printed, and the exit status is the number of runs (LABEL
        triples) with a regression or a missing XML.

    compare.py opencv OUT.md LABEL BARE.npz BARE.json BARE.log SP.npz SP.json SP.log [TRACE_DIR]
        The OpenCV T-API workload: every output bit for bit, OpenCV's "OpenCL error" lines
        (it prints one and falls back to the CPU when a call fails, so a broken OpenCL path
        can still give the right answer), and, from SoftPreempt's trace, the OpenCL kernels
        each operation sent through the scheduler (an operation that sent none did not test
        the layer).

    compare.py opencv-stable BARE1.npz BARE2.npz
        The names of outputs that differ between two bare runs (run-to-run noise of the
        driver); the workload must have none.

Each comparison appends a Markdown section to OUT.md (the summary clients.sh prints and
docs/compatibility.md quotes).
"""
import glob
import json
import re
import sys
import xml.etree.ElementTree as ET

PLATFORM_PARAMS = [
    # ctx_factory's id: "<context factory for <pyopencl.Device 'NAME' on 'PLATFORM'>>"
    (re.compile(r"<context factory for <pyopencl\.Device '.*?' on '.*?'>>"), "ctx"),
    # a platform parameter: "<pyopencl.Platform 'PLATFORM'>"
    (re.compile(r"<pyopencl\.Platform '.*?'>"), "platform"),
]

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
KNOWN_FAILURE = "known failure"


# A difference with a known cause outside SoftPreempt, accepted only with this exact
# failure: pyopencl's test helper `_xfail_if_pocl` (test/test_wrapper.py) takes PoCL by
# its platform *vendor* ("The pocl project", which SoftPreempt reports unchanged so
# applications' vendor quirk tables keep applying) and then asks
# `characterize.get_pocl_version`, which takes PoCL by its platform *name* ("Portable
# Computing Language"; SoftPreempt's platform is named "SoftPreempt") and so returns None;
# the helper then compares None with a tuple. pyopencl's library code handles that None.
# See docs/compatibility.md.
KNOWN = {
    "test_wrapper::test_enqueue_barrier_marker[ctx]",
    "test_wrapper::test_unload_compiler[platform]",
    "test_wrapper::test_user_event[ctx]",
}
KNOWN_MESSAGE = "'<=' not supported between instances of 'NoneType' and 'tuple'"


def test_id(case):
    name = case.get("name", "")
    for pattern, repl in PLATFORM_PARAMS:
        name = pattern.sub(repl, name)
    return f"{case.get('classname', '')}::{name}"


def read_junit(path):
    """{test id: outcome}, or None when the file is missing or unreadable (the run
    crashed before pytest wrote it)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    results = {}
    for case in root.iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None and test_id(case) in KNOWN and KNOWN_MESSAGE in (
                bad.get("message") or ""):
            outcome = KNOWN_FAILURE
        elif bad is not None:
            outcome = FAILED
        elif case.find("skipped") is not None:
            outcome = SKIPPED
        else:
            outcome = PASSED
        tid = test_id(case)
        # A test that errors in teardown appears twice; the worse outcome wins.
        if results.get(tid) != FAILED:
            results[tid] = outcome
    return results


def counts(results):
    if results is None:
        return "no results (the run crashed)"
    c = {PASSED: 0, FAILED: 0, SKIPPED: 0, KNOWN_FAILURE: 0}
    for outcome in results.values():
        c[outcome] += 1
    known = f", {c[KNOWN_FAILURE]} known" if c[KNOWN_FAILURE] else ""
    return f"{c[PASSED]} passed, {c[FAILED]} failed, {c[SKIPPED]} skipped{known}"


def compare_pytest(out, triples):
    lines = ["| run | bare driver | through SoftPreempt | regressions |", "|---|---|---|---|"]
    problems = []
    details = []
    bad_runs = 0
    for label, bare_path, sp_path in triples:
        before = len(problems)
        bare_path, _, only = bare_path.partition("@")
        bare, sp = read_junit(bare_path), read_junit(sp_path)
        if bare is not None and only:
            modules = set(only.split(","))
            bare = {t: o for t, o in bare.items() if t.split("::")[0] in modules}
        if bare is None:
            problems.append(f"{label}: the bare run left no JUnit XML ({bare_path})")
            regressions = []
        elif sp is None:
            problems.append(f"{label}: the SoftPreempt run left no JUnit XML ({sp_path})")
            regressions = sorted(t for t, o in bare.items() if o == PASSED)
        else:
            regressions = sorted(
                t for t, o in bare.items()
                if o == PASSED and sp.get(t) not in (PASSED, KNOWN_FAILURE)
            )
            known = sorted(t for t, o in sp.items() if o == KNOWN_FAILURE)
            if known:
                details.append(f"{label}: known difference (pyopencl's test helper mixes "
                               f"platform vendor and name, see compare.py): "
                               f"{', '.join(known)}")
            fixed = sorted(t for t, o in sp.items() if o == PASSED and bare.get(t) != PASSED)
            if fixed:
                details.append(f"{label}: passed through SoftPreempt only: {', '.join(fixed)}")
        lines.append(f"| {label} | {counts(bare)} | {counts(sp)} | {len(regressions)} |")
        for t in regressions:
            problems.append(f"{label}: passes on the bare driver, not through SoftPreempt "
                            f"({sp.get(t, 'missing') if sp else 'missing'}): {t}")
        bad_runs += len(problems) > before
    report(out, "pyopencl test suite", lines, details, problems)
    return bad_runs


def compare_opencv(out, label, bare, sp, trace_dir):
    import numpy as np

    bare_npz, bare_json, bare_log = bare
    sp_npz, sp_json, sp_log = sp
    problems, details = [], []
    with open(bare_json) as f:
        bare_info = json.load(f)
    with open(sp_json) as f:
        sp_info = json.load(f)
    a, b = np.load(bare_npz), np.load(sp_npz)
    kernels = kernels_per_op(sp_info, trace_dir) if trace_dir else {}
    lines = [
        f"OpenCV {sp_info['opencv']}; bare device: {bare_info['device']} "
        f"({bare_info['device_version']}); through SoftPreempt: {sp_info['device']} "
        f"({sp_info['device_version']})",
        "",
        "| module | operation | outputs | identical | OpenCL kernels through SoftPreempt |",
        "|---|---|---|---|---|",
    ]
    for op in sp_info["ops"]:
        name = op["name"]
        keys = [f"{name}#{i}" for i in range(op["outputs"])]
        same = all(k in a.files and k in b.files and a[k].dtype == b[k].dtype
                   and a[k].shape == b[k].shape and np.array_equal(a[k], b[k], equal_nan=True)
                   for k in keys)
        if not same:
            problems.append(f"{label}: {name}: output differs from the bare driver's")
        ks = kernels.get(name)
        if trace_dir and not ks:
            problems.append(f"{label}: {name}: no OpenCL kernel went through SoftPreempt "
                            "(OpenCV took its CPU path)")
        lines.append(f"| {op['module']} | {name} | {len(keys)} | {'yes' if same else 'NO'} | "
                     f"{', '.join(sorted(ks)) if ks else '-'} |")
    bare_errors, sp_errors = opencl_errors(bare_log), opencl_errors(sp_log)
    if bare_errors:
        details.append(f"{label}: bare driver: {len(bare_errors)} OpenCL error line(s)")
    for e in sp_errors:
        if e not in bare_errors:
            problems.append(f"{label}: through SoftPreempt only: {e}")
    lines.append("")
    lines.append(f"{len(sp_info['ops'])} operations; OpenCL errors: bare {len(bare_errors)}, "
                 f"through SoftPreempt {len(sp_errors)}")
    report(out, f"OpenCV T-API, {label}", lines, details, problems)
    return not problems


def opencl_errors(log_path):
    """OpenCV's lines for failed OpenCL calls (it then falls back to the CPU)."""
    with open(log_path, errors="replace") as f:
        return sorted({line.strip() for line in f if "OpenCL error" in line})


def kernels_per_op(info, trace_dir):
    """{op name: kernel names} from SoftPreempt's trace: slices (launches through the
    layer's queue) and direct launches (sent straight to the driver: a low queue whose CPU
    device threads run in the idle class sends its short launches so even next to a
    registered higher priority) whose time falls inside the operation's CLOCK_MONOTONIC
    window (the trace uses the same clock, in µs)."""
    slices = []
    for path in glob.glob(f"{trace_dir}/softpreempt-*.json"):
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
        slices += [(e["ts"] * 1000.0, e["name"]) for e in events
                   if e.get("cat") == "slice" and "ts" in e]
        slices += [(e["ts"] * 1000.0, e["args"]["kernel"]) for e in events
                   if e.get("cat") == "direct" and "ts" in e and "kernel" in e.get("args", {})]
    found = {}
    for op in info["ops"]:
        found[op["name"]] = {n for ts, n in slices if op["start_ns"] <= ts <= op["end_ns"]}
    return found


def unstable(npz1, npz2):
    import numpy as np

    a, b = np.load(npz1), np.load(npz2)
    names = set()
    for k in a.files:
        if k not in b.files or not np.array_equal(a[k], b[k], equal_nan=True):
            names.add(k.split("#")[0])
    return sorted(names)


def report(out, title, lines, details, problems):
    text = [f"## {title}", ""] + lines + [""]
    text += [f"- {d}" for d in details]
    if problems:
        text += ["", f"**{len(problems)} problem(s):**", ""] + [f"- {p}" for p in problems]
    else:
        text += ["", "No regression."]
    text = "\n".join(text) + "\n\n"
    with open(out, "a") as f:
        f.write(text)
    sys.stdout.write(text)


def main(argv):
    if len(argv) >= 2 and argv[0] == "pytest" and (len(argv) - 2) % 3 == 0:
        rest = argv[2:]
        triples = [tuple(rest[i:i + 3]) for i in range(0, len(rest), 3)]
        return compare_pytest(argv[1], triples)
    if len(argv) in (9, 10) and argv[0] == "opencv":
        trace = argv[9] if len(argv) == 10 else None
        ok = compare_opencv(argv[1], argv[2], tuple(argv[3:6]), tuple(argv[6:9]), trace)
        return 0 if ok else 1
    if len(argv) == 3 and argv[0] == "opencv-stable":
        names = unstable(argv[1], argv[2])
        for n in names:
            print(f"differs run to run on the bare driver: {n}")
        return 1 if names else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
