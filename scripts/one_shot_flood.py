#!/usr/bin/env python3
"""A one-shot flood against the demo over HTTP, as issue #30 tried it (a figures run, not a test).

Starts the `onsale` demo on a free loopback port (capacity 1, 20 s refresh; `--store memory`: the embedded store in
memory, `--store redis`: a redis-server of its own on a free port), then:

1. One person takes the only place (a protected page, then polls until let in: their pass holds the place).
2. Reads the demo's resident memory (`/proc/PID/statm`) or Redis's `used_memory`.
3. Floods `GET /seats` without a cookie (`Accept: application/json`, what a bot, a crawler or a link preview
   sends) with wrk runs of `--seconds` each, `--connections` connections, until at least `--requests` were sent
   (at most 5 runs; the total sent is printed).
4. A person who comes next takes a ticket and redeems it (their first poll): the redeem is what grows Redis's
   bitmap of held numbers up to theirs. Reads the memory again: bytes per one-shot request.
5. That person (a protected page as a browser, then the holding page's polls with the cookie) polls
   every 10 s for `--watch` seconds: their position, `in_line` and estimate each time.

Usage: scripts/one_shot_flood.py [--store memory|redis] [--requests 3000000] [--seconds 60] [--connections 32]
                                 [--watch 30] [--binary PATH]
The demo is built with `cargo build --release --example onsale --features redis` unless --binary names one.
Loopback only; every wrk run is bounded by --seconds, the whole by a few minutes.
"""
import argparse, json, os, re, subprocess, sys, tempfile, time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_http import WRK_DONE, free_port, get, onsale_binary, start_redis, wait_port, wrk_result  # noqa: E402


def rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def used_memory(rport):
    out = subprocess.run(["redis-cli", "-p", str(rport), "INFO", "memory"], capture_output=True, text=True,
                         timeout=10).stdout
    return int(re.search(r"used_memory:(\d+)", out).group(1))


def status(port, jar):
    st, body = get(port, "/waitroom/status", jar)
    assert st < 500, f"a poll answered {st}"
    return json.loads(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", choices=["memory", "redis"], default="memory")
    ap.add_argument("--requests", type=int, default=3_000_000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--watch", type=int, default=30)
    ap.add_argument("--binary")
    args = ap.parse_args()
    binary = onsale_binary(args.binary, "redis")
    redis, rport = (start_redis() if args.store == "redis" else (None, None))
    port = free_port()
    cmd = [binary, "--port", str(port), "--capacity", "1", "--refresh-seconds", "20"]
    cmd += ["--redis", f"redis://127.0.0.1:{rport}", "--data-dir", tempfile.mkdtemp()] if redis else ["--memory-only"]
    demo = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    lua = os.path.join(tempfile.gettempdir(), f"waitroom-flood-{os.getpid()}.lua")
    with open(lua, "w") as f:
        f.write('wrk.headers["Accept"] = "application/json"\n' + WRK_DONE)
    try:
        wait_port(port, demo, "the demo")
        holder = {}
        get(port, "/seats", holder, accept="text/html")
        deadline = time.time() + 10
        while status(port, holder)["state"] not in ("admitted", "active"):
            assert time.time() < deadline, "the first person was not let in within 10 s"
            time.sleep(0.3)
        memory = (lambda: used_memory(rport)) if redis else (lambda: rss(demo.pid))
        before = memory()
        sent, runs = 0, 0
        t0 = time.time()
        while sent < args.requests and runs < 5:
            out = subprocess.run(["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "-s", lua,
                                  f"http://127.0.0.1:{port}/seats"], capture_output=True, text=True,
                                 timeout=args.seconds + 30).stdout
            r = wrk_result(out)
            assert r["errors"] == 0, f"wrk errors: {r}"
            sent += r["requests"]
            runs += 1
        took = time.time() - t0
        person = {}
        st, _ = get(port, "/seats", person, accept="text/html")
        assert st < 500
        t1 = time.time()
        first = status(port, person)
        grew = memory() - before
        print(f"store {args.store}: {sent:,} one-shot requests in {took:.0f} s ({sent / took:,.0f}/s)")
        print(f"memory: {'used_memory' if redis else 'RSS'} {grew:+,} B = {grew / sent:.2f} B a one-shot request "
              "(the next person's redeem included)")
        for k in range(args.watch // 10 + 1):
            while time.time() < t1 + 10 * k:
                time.sleep(0.2)
            s = first if k == 0 else status(port, person)
            print(f"the person who came next, +{10 * k} s: state {s['state']}, position {s['position']}, "
                  f"in_line {s['in_line']}, eta {s['eta_seconds']} s")
    finally:
        if os.path.exists(lua):
            os.remove(lua)
        for p in (demo, redis):
            if p:
                p.terminate()
                p.wait(timeout=10)


if __name__ == "__main__":
    main()
