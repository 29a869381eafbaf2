#!/usr/bin/env python3
"""HTTP benchmark of the on-sale demo with a real load generator (wrk), every figure against /healthz in the same run.

Starts the demo (release build) on a free loopback port, joins N sessions through the real HTTP surface (the first
`capacity` are let in and claim their admission token), then drives wrk with a Lua script that cycles through the
sessions' cookies against:
  - GET /waitroom/status   a waiting session's poll (JSON, answered from the room's local memory)
  - GET /api/ping          an admitted request passing through both layers (room layer + VerifyLayer) to a handler
                           identical to /healthz's (`ok`): what the layers cost, nothing else
  - GET /api/me            the same with a handler that reads the admission and writes a small JSON body
  - GET /healthz           a bare route outside the room (the baseline), sent with the waiting sessions' cookies
  - GET /seats             without a cookie: a first contact (a new session gets a ticket, the next line number,
                           in a full room; 429 with its status): each request takes a number
  - GET /healthz           without a cookie (`healthz_none`, not run by default): the join's baseline with the same
                           wrk script and request shape (no Cookie header), for `--targets healthz_none,join`
for the embedded store in memory only (`--memory-only`: the demo before it was durable), the embedded store durable
in a fresh data directory (the demo's default; joins committed every 100 ms), and, with --redis, for the Redis store
(a redis-server the script starts on a free port).
The admitted requests carry the token cookie besides the session cookie (~490 bytes of cookies against ~90 for
/healthz): that difference is charged to the room, not taken out.

The targets run in --rounds interleaved rounds (healthz, poll, ping, me, healthz, ..., healthz): each round's ratio
is taken against the mean of the two /healthz runs around it, and the table shows the median over rounds
(requests/s, ratio, latencies), followed by a line with every round's ratio and the spread. wrk shares the two
cores with the demo, so throughput moves with whatever else the machine does; the table also gives the demo's own
CPU time per request (utime + stime from /proc/<pid>/stat over each run), which moves much less.

With --instructions the demo runs under valgrind's callgrind instead, and each target is one wrk run at 4
connections: the table gives the demo's user-space instructions per request (all threads; counted, not timed, so
the figure repeats on a busy machine, unlike requests/s) and how many more than /healthz's (user space only:
the kernel's share of a request, about half of it, is not counted). Under valgrind SHA-256 runs
its portable code (no SHA-NI), which inflates the session cookie's HMAC check: about 7,000 instructions on every
request the room reads a cookie for.

With --drawn (a random draw's pre-queue, every ticket redeemed) and the targets poll,poll_drawn, the same people's
polls are measured before the draw and again after it (the opening moved to now through the admin API), with the
cookies they held before it, those let in left out: what a drawn person's poll costs against a pre-queued one's.

With --redis the table also gives the Redis commands per request (the server's total_commands_processed over each
run, background ticks, refreshes and flushes included). With --p99-at 0.8 the joins then run at 80% of their
highest rate (each connection waits 1 ms after each answer, the number of connections set to reach the rate) and
their latency percentiles are printed.

Usage: scripts/bench_http.py [--sessions 2000] [--capacity 200] [--seconds 8] [--connections 32] [--rounds 5]
                             [--redis] [--binary PATH] [--instructions] [--targets healthz_none,join]
                             [--stores memory,redis] [--p99-at 0.8] [--prequeue] [--drawn --targets poll,poll_drawn]
The demo is built with `cargo build --release --example onsale` and run from $CARGO_TARGET_DIR (default
ROOT/target); --binary runs a given build instead (no build), e.g. to compare two builds.
Loopback only; every run is bounded by --seconds and stops by itself.
"""
import argparse, glob, http.client, json, os, re, secrets, shutil, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
if not os.path.isabs(TARGET_DIR):
    TARGET_DIR = os.path.join(ROOT, TARGET_DIR)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, what, timeout=60):
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            sys.exit(f"{what} exited early with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not listen on {port}")


def onsale_binary(binary=None, features=""):
    """The demo to run: `binary` as given, or the release build of the `onsale` example (built now, with `features`)."""
    if binary:
        return os.path.abspath(binary)
    subprocess.run(["cargo", "build", "--release", "--example", "onsale"] + (["--features", features] if features else []),
                   cwd=ROOT, check=True)
    return os.path.join(TARGET_DIR, "release", "examples", "onsale")


def start_redis(*extra, rdir=None):
    """A redis-server on a free loopback port, nothing persisted (`extra`: more of its flags): (process, port)."""
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", rdir or tempfile.mkdtemp()] + list(extra),
                             stdout=subprocess.DEVNULL)
    wait_port(rport, redis, "redis-server")
    return redis, rport


def get(port, path, cookies, accept="application/json"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    hdr = {"Accept": accept}
    if cookies:
        hdr["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    c.request("GET", path, headers=hdr)
    r = c.getresponse()
    body = r.read()
    for k, v in r.getheaders():
        if k.lower() == "set-cookie":
            name, _, rest = v.partition("=")
            val = rest.split(";", 1)[0]
            if val:
                cookies[name] = val
            else:
                cookies.pop(name, None)
    c.close()
    return r.status, body


def wrk(port, path, cookie_file, seconds, connections, delay_ms=0):
    lua = os.path.join(tempfile.gettempdir(), f"waitroom-wrk-{os.getpid()}.lua")
    with open(lua, "w") as f:
        f.write(f"""
local cookies = {{}}
for line in io.lines("{cookie_file}") do cookies[#cookies + 1] = line end
local i = 0
local json = {{ ["Accept"] = "application/json" }}
request = function()
  i = i % #cookies + 1
  -- An empty line: no Cookie header at all (a first contact).
  if cookies[i] == "" then
    return wrk.format("GET", "{path}", json)
  end
  return wrk.format("GET", "{path}", {{ ["Cookie"] = cookies[i], ["Accept"] = "application/json" }})
end
{"delay = function() return " + str(delay_ms) + " end" if delay_ms else ""}
""" + WRK_DONE)
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", lua, f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, timeout=seconds + 30).stdout
    return wrk_result(out)


# The `done` function of every wrk script here: one line the scripts parse (`wrk_result`), latencies in µs.
WRK_DONE = """
done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d rps=%.1f p50=%d p90=%d p99=%d errors=%d non2xx=%d\\n",
    summary.requests, summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(90),
    latency:percentile(99), summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout, summary.errors.status))
end
"""


def wrk_result(out):
    """The figures of a wrk run whose script ends with `WRK_DONE`."""
    m = re.search(r"RESULT requests=(\d+) rps=([\d.]+) p50=(\d+) p90=(\d+) p99=(\d+) errors=(\d+) non2xx=(\d+)", out)
    if not m:
        sys.exit(f"wrk printed no result:\n{out}")
    requests, rps, p50, p90, p99, errors, non2xx = m.groups()
    return dict(requests=int(requests), rps=float(rps), p50=int(p50), p90=int(p90), p99=int(p99), errors=int(errors), non2xx=int(non2xx))


# label -> (path, which sessions' cookies)
TARGETS = {
    "healthz": ("/healthz", "waiting"),
    "poll": ("/waitroom/status", "waiting"),
    "poll_drawn": ("/waitroom/status", "waiting"),
    "ping": ("/api/ping", "admitted"),
    "me": ("/api/me", "admitted"),
    "healthz_admitted": ("/healthz", "admitted"),
    "join": ("/seats", "none"),
    "healthz_none": ("/healthz", "none"),
}
NAMES = {
    "healthz": "GET /healthz (bare, baseline)",
    "poll": "GET /waitroom/status (waiting poll)",
    "poll_drawn": "GET /waitroom/status after the draw (with --drawn: the same people, the same cookies)",
    "ping": "GET /api/ping (admitted, both layers, bare handler)",
    "me": "GET /api/me (admitted, both layers, JSON handler)",
    "healthz_admitted": "GET /healthz with the admitted cookies (bare)",
    "join": "GET /seats without a cookie (a first contact: a ticket; 429 is its answer)",
    "healthz_none": "GET /healthz without a cookie (the join's baseline: the same request shape)",
}


def redis_commands(redis_port):
    """Commands the Redis server has processed so far (`INFO stats` total_commands_processed); `INFO` itself counts one."""
    out = subprocess.run(["redis-cli", "-p", str(redis_port), "INFO", "stats"], capture_output=True, text=True,
                         timeout=10).stdout
    m = re.search(r"total_commands_processed:(\d+)", out)
    return int(m.group(1)) if m else 0


def cpu_seconds(pid):
    """The process's user + system CPU time so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def callgrind_total(out_file, pid):
    """Dumps the callgrind counters of `pid` (then zeroes them): the instructions since the last dump, and the dump
    file (for `callgrind_annotate --inclusive=yes FILE`, which splits them by function)."""
    before = set(glob.glob(out_file + ".*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True, timeout=120)
    new = sorted(set(glob.glob(out_file + ".*")) - before, key=lambda f: int(f.rsplit(".", 1)[1]))
    if not new:
        sys.exit("callgrind_control wrote no dump")
    with open(new[-1]) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1]), new[-1]
    sys.exit(f"no totals in {new[-1]}")


def run(store, args, redis_url=None):
    targets = args.targets
    port = free_port()
    cmd = [args.onsale, "--port", str(port),
           "--capacity", str(args.capacity), "--refresh-seconds", "20"]
    if args.prequeue:
        # The door shut for an hour, a random draw at its opening: every first contact joins the pre-queue.
        cmd += ["--fairness", "random", "--opens-in", "3600"]
    token, token_dir = None, None
    if args.drawn:
        # The opening is moved to now through the admin API once the pre-queue's polls are measured.
        token = secrets.token_urlsafe(32)
        token_dir = tempfile.mkdtemp(prefix="waitroom-bench-admin-")
        token_file = os.path.join(token_dir, "admin-token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(f"bench:{token}\n")
        cmd += ["--admin-token-file", token_file]
    data_dir = tempfile.mkdtemp(prefix="waitroom-bench-data-")
    if redis_url:
        cmd += ["--redis", redis_url, "--data-dir", data_dir]
    elif store == "memory":
        cmd += ["--memory-only"]
    else:
        cmd += ["--data-dir", data_dir]
    cg_out = None
    if args.instructions:
        cg_dir = tempfile.mkdtemp(prefix="waitroom-callgrind-")
        cg_out = os.path.join(cg_dir, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg_out}"] + cmd
    demo = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    try:
        wait_port(port, demo, "the demo", timeout=180 if cg_out else 60)
        waiting, admitted = [], []
        for i in range(args.sessions):
            jar = {}
            st, _ = get(port, "/seats", jar, accept="text/html")
            assert st < 500, f"join answered {st}"
            (admitted if i < args.capacity and not args.prequeue else waiting).append(jar)
        # A few ticks: the first `capacity` are let in (slower under valgrind, hence the retries).
        deadline = time.time() + (60 if cg_out else 10)
        for jar in admitted:
            while True:
                st, body = get(port, "/waitroom/status", jar)
                state = json.loads(body)["state"]
                if state == "admitted" or time.time() > deadline:
                    break
                time.sleep(0.5)
            assert state == "admitted" and "waitroom_token" in jar, f"not admitted: {state}"
        for jar in (waiting if args.drawn else waiting[:5]):
            # With --drawn every ticket is redeemed (as the holding page's first poll does): the polls measured
            # are pre-queued people's, then the same people's after the draw, with the cookies they hold.
            st, body = get(port, "/waitroom/status", jar)
            state = json.loads(body)["state"]
            assert state == ("prequeue" if args.prequeue else "waiting"), body
        for path in ("/api/me", "/api/ping") if admitted else ():
            st, _ = get(port, path, dict(admitted[0]))
            assert st == 200, f"{path} with a token answered {st}"
            st, _ = get(port, path, dict(waiting[0]))
            assert st != 200, f"{path} without a token answered {st}"
        files = {}
        def write_cookies(path, jars):
            # A line of cookies a session, as a browser sends them (an empty line: none).
            with open(path, "w") as f:
                for jar in jars:
                    f.write("; ".join(f"{k}={v}" for k, v in jar.items()) + "\n")

        for name, jars in (("waiting", waiting), ("admitted", admitted), ("none", [{}])):
            files[name] = os.path.join(tempfile.gettempdir(), f"waitroom-cookies-{name}-{os.getpid()}")
            write_cookies(files[name], jars)
        res = {label: [] for label in targets}
        pre_draw = [t for t in targets if t != "poll_drawn"]
        post_draw = ["healthz", "poll_drawn"] if "poll_drawn" in targets else []

        def draw():
            # Open now (the admin API's `open-now`: a draw before the scheduled opening counts everyone drawn as
            # seen at the draw, so nobody is passed as away for having joined long before); the draw runs at the
            # next tick. Measured once a person asked is answered from the draw and a few more seconds have passed
            # for the draw's own work (the instance reading its pages). The measurement after it is short next to
            # the arrival window (60 s), so those let in at the draw are not yet followed by others; on Redis a
            # few percent of the answers re-seal a cookie with its number (the spread starts at the first page
            # kept, and the cookie files keep the cookies of before the draw); on the embedded stores, which keep
            # no draw, every answer does.
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("POST", "/waitroom/admin/open-now",
                      headers={"Authorization": f"Bearer {token}", "Content-Length": "0"})
            r = c.getresponse()
            assert r.status == 200, f"open-now answered {r.status}: {r.read()[:200]!r}"
            c.close()
            deadline = time.time() + (120 if cg_out else 30)
            while True:
                st, body = get(port, "/waitroom/status", dict(waiting[0]))
                state = json.loads(body)["state"]
                if state in ("waiting", "admitted"):
                    break
                assert time.time() < deadline, f"no draw: {state}"
                time.sleep(0.5)
            time.sleep(10 if cg_out else 3)
            # Those let in leave the polls (their page goes on to the shop, as in the soak); the rest poll with the
            # cookies they held before the draw (each asked with a copy, so no cookie learns its number here).
            kept = [jar for jar in waiting if json.loads(get(port, "/waitroom/status", dict(jar))[1])["state"] == "waiting"]
            assert len(kept) >= len(waiting) - args.capacity, f"only {len(kept)} of {len(waiting)} waiting after the draw"
            write_cookies(files["waiting"], kept)

        if cg_out:
            # Warm every path once, then count each target over one run.
            for label in pre_draw:
                path, jar = TARGETS[label]
                wrk(port, path, files[jar], 2, 4)

            def count(label):
                path, jar = TARGETS[label]
                callgrind_total(cg_out, demo.pid)
                r = wrk(port, path, files[jar], args.seconds, 4)
                total, r["dump"] = callgrind_total(cg_out, demo.pid)
                r["instructions"] = total / max(r["requests"], 1)
                res[label].append(r)

            for label in pre_draw:
                count(label)
            if post_draw:
                draw()
            for label in post_draw:
                count(label)
            return res
        rport = int(redis_url.rsplit(":", 1)[1]) if redis_url else None
        def measure(label, connections=args.connections, delay_ms=0, seconds=args.seconds):
            path, jar = TARGETS[label]
            before = cpu_seconds(demo.pid)
            cmds = redis_commands(rport) if rport else 0
            r = wrk(port, path, files[jar], seconds, connections, delay_ms)
            r["cpu_us"] = (cpu_seconds(demo.pid) - before) * 1e6 / max(r["requests"], 1)
            if rport:
                r["redis_per_request"] = (redis_commands(rport) - cmds - 1) / max(r["requests"], 1)
            return r
        for _ in range(args.rounds):
            for label in pre_draw:
                res[label].append(measure(label))
        # The closing baseline: every round sits between two /healthz runs.
        res["healthz"].append(measure("healthz"))
        if post_draw:
            draw()
            res["healthz_drawn"] = [measure("healthz")]
            for _ in range(args.rounds):
                res["poll_drawn"].append(measure("poll_drawn"))
                res["healthz_drawn"].append(measure("healthz"))
        if args.p99_at and "join" in targets:
            # Joins at a fraction of the highest join rate measured above: each connection waits `delay` ms after
            # each answer (wrk's `delay()`, whole milliseconds), and the number of connections is set so the
            # rate comes out at the target; one correction run, then the run reported. wrk measures each request
            # from its sending (a closed loop with think time: no coordinated-omission correction).
            target = args.p99_at * statistics.median(x["rps"] for x in res["join"])
            conns = max(2, round(target * 0.0012))
            for _ in range(2):
                r = measure("join", connections=conns, delay_ms=1)
                conns = max(2, round(conns * target / max(r["rps"], 1)))
            r["target"] = target
            res["join_at"] = [r]
        return res
    finally:
        demo.terminate()
        demo.wait(10)
        size = sum(os.path.getsize(os.path.join(data_dir, f)) for f in os.listdir(data_dir))
        if size:
            print(f"# {store}: data directory {size:,} bytes after the run", file=sys.stderr)
        shutil.rmtree(data_dir, ignore_errors=True)
        if token_dir:
            shutil.rmtree(token_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--capacity", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of every target (median reported)")
    ap.add_argument("--redis", action="store_true", help="also run against a redis-server started on a free port")
    ap.add_argument("--binary", help="run this onsale build instead of building one")
    ap.add_argument("--targets", default=",".join(t for t in TARGETS if t != "healthz_none"),
                    help="comma-separated targets to run (healthz always runs); e.g. healthz_none,join")
    ap.add_argument("--stores", default="memory,durable,redis",
                    help="which of memory, durable, redis to run (redis also needs --redis)")
    ap.add_argument("--p99-at", type=float, default=0,
                    help="then run joins at this fraction of their highest rate (e.g. 0.8) and report their latency")
    ap.add_argument("--prequeue", action="store_true",
                    help="the door shut for an hour before a random draw: joins are pre-queue joins, polls pre-queued "
                         "people's (targets healthz, healthz_none, join, poll only)")
    ap.add_argument("--drawn", action="store_true",
                    help="--prequeue, every ticket redeemed; then with target poll_drawn the opening moved to now (the "
                         "admin API) and the same people's polls measured again after the draw (targets healthz, "
                         "poll, poll_drawn only)")
    ap.add_argument("--instructions", action="store_true",
                    help="count the demo's instructions per request under valgrind's callgrind instead of timing")
    args = ap.parse_args()
    args.targets = ["healthz"] + [t for t in args.targets.split(",") if t and t != "healthz"]
    args.prequeue = args.prequeue or args.drawn
    if "poll_drawn" in args.targets and not args.drawn:
        sys.exit("target poll_drawn needs --drawn")
    if args.drawn and not set(args.targets) <= {"healthz", "poll", "poll_drawn"}:
        sys.exit("--drawn runs healthz, poll and poll_drawn only")
    for t in args.targets:
        if t not in TARGETS:
            sys.exit(f"unknown target {t}; one of {', '.join(TARGETS)}")
        if args.prequeue and t not in ("healthz", "healthz_none", "join", "poll", "poll_drawn"):
            sys.exit(f"--prequeue runs healthz, healthz_none, join, poll and poll_drawn only (nobody is admitted), not {t}")
    if args.instructions and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sys.exit("--instructions needs valgrind: apt-get install valgrind")
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: apt-get install wrk")
    args.onsale = onsale_binary(args.binary, "redis" if args.redis else "")
    stores = [(s, None) for s in ("memory", "durable") if s in args.stores.split(",")]
    redis = None
    if args.redis and "redis" in args.stores.split(","):
        redis, rport = start_redis()
        stores.append(("redis", f"redis://127.0.0.1:{rport}"))
    try:
        if args.instructions:
            print(f"# {time.strftime('%Y-%m-%d')} the demo under callgrind; wrk -t1 -c4 -d{args.seconds}s per target; "
                  f"{args.sessions} sessions, capacity {args.capacity}")
            print("| store | target | requests | instructions per request | more than /healthz |")
            print("|---|---|---|---|---|")
            dumps = []
            for store, url in stores:
                r = run(store, args, url)
                base = r["healthz"][0]["instructions"]
                for label in args.targets:
                    name = NAMES[label]
                    x = r[label][0]
                    print(f"| {store} | {name} | {x['requests']:,} | {x['instructions']:,.0f} | "
                          f"{x['instructions'] - base:+,.0f} |")
                    dumps.append(f"{store} {label}: {x['dump']}")
            print("\nBy function: callgrind_annotate --inclusive=yes FILE (divide by the requests above)")
            for d in dumps:
                print(d)
            return
        print(f"# {time.strftime('%Y-%m-%d')} {os.cpu_count()} cores; wrk -t1 -c{args.connections} -d{args.seconds}s; "
              f"{args.sessions} sessions, capacity {args.capacity}; {args.rounds} interleaved rounds, medians")
        print("| store | target | requests/s | vs /healthz | p50 | p90 | p99 | errors | non-2xx | demo CPU per request | vs /healthz | Redis commands per request |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        notes = []
        for store, url in stores:
            r = run(store, args, url)
            med = statistics.median
            for label in args.targets:
                name = NAMES[label]
                runs = r[label]
                # The /healthz runs around this target's rounds (those after the draw for poll_drawn): round i
                # between runs i and i + 1.
                base = r["healthz_drawn" if label == "poll_drawn" else "healthz"]
                h = [x["rps"] for x in base]
                ratios = ([1.0] * len(runs) if label == "healthz"
                          else [x["rps"] / ((h[i] + h[i + 1]) / 2) for i, x in enumerate(runs)])
                base_cpu = med([x["cpu_us"] for x in base])
                rps = med([x["rps"] for x in runs])
                cpu = med([x["cpu_us"] for x in runs])
                print(f"| {store} | {name} | {rps:,.0f} | {100 * med(ratios):.0f}% | {med([x['p50'] for x in runs]) / 1000:.2f} ms | "
                      f"{med([x['p90'] for x in runs]) / 1000:.2f} ms | {med([x['p99'] for x in runs]) / 1000:.2f} ms | "
                      f"{sum(x['errors'] for x in runs)} | {sum(x['non2xx'] for x in runs)} | {cpu:.2f} µs | "
                      f"{100 * base_cpu / cpu:.0f}% | "
                      + (f"{med([x['redis_per_request'] for x in runs]):.4f} |" if url else "– |"))
                if label != "healthz":
                    notes.append(f"{store} {label}: per-round ratios {', '.join(f'{100 * x:.0f}%' for x in ratios)} "
                                 f"(median {100 * med(ratios):.0f}%, spread {100 * (max(ratios) - min(ratios)):.0f} points)")
                else:
                    notes.append(f"{store} healthz: requests/s per run {', '.join(f'{x:,.0f}' for x in h)}")
            if "join" in r and "healthz_none" in r:
                js = [j["rps"] / b["rps"] for j, b in zip(r["join"], r["healthz_none"])]
                notes.append(f"{store} join against /healthz without a cookie (same wrk script, same round): "
                             f"{', '.join(f'{100 * x:.0f}%' for x in js)} (median {100 * med(js):.0f}%)")
            if "join_at" in r:
                x = r["join_at"][0]
                notes.append(f"{store} joins at {100 * args.p99_at:.0f}% of their highest rate (target {x['target']:,.0f}/s): "
                             f"{x['rps']:,.0f}/s ({100 * x['rps'] / max(x['target'], 1):.0f}% of the target), p50 "
                             f"{x['p50'] / 1000:.2f} ms, p90 {x['p90'] / 1000:.2f} ms, p99 {x['p99'] / 1000:.2f} ms, errors {x['errors']}"
                             + (f", Redis commands per join {x['redis_per_request']:.4f}" if url else ""))
        print()
        for n in notes:
            print(n)
    finally:
        if redis:
            redis.terminate()


if __name__ == "__main__":
    main()
