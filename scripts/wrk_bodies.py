#!/usr/bin/env python3
"""What the load generator itself pays for per-person answers (issue #31's soak): wrk against a fixed server.

The soak (`scripts/soak_redis.py`) compares polls a second after the opening with before it, with wrk beside the
room on the same two cores. Before the draw every pre-queued person's answer is the same JSON (within a second);
after it, each waiting person's answer holds their own place and wait. wrk hands every answer's body to its Lua
`response` function as a Lua string, and LuaJIT interns every string: its hash of a string that long samples four
places of it (the first and last four bytes, and four at a quarter and at half its length), so answers that differ
only in a few digits elsewhere fall in the same hash chain, and each new one walks that chain (a pointer chase
through a heap of tens of megabytes) before it is added. The soak's people are polled every few seconds, so after
the draw nearly every answer is a new string.

This measures that cost apart from the room: nginx (one worker, pinned to the second core) answers the soak's poll
with a body of the same shape and length as the room's, either the same for everyone (`prequeue`, with the time of
the second in it, as the room's) or holding the person's own numbers, read from their cookie (`waiting`); wrk (one
thread, pinned to the first core, so wrk is the limit) polls the same people round robin with the soak's request
shape, in three scripts: the people's requests kept as Lua strings with a `response` function (as the soak must
have one: it keeps new cookies and drops people let in), the same without one, and the requests kept in one C
buffer with the collector's pause at 120, with a `response` function (the soak's script since c71cda3: with a
small Lua heap the collector comes round soon and sweeps the answers before their chains grow). Interleaved
runs; the medians of requests a second, and each script's waiting / prequeue ratio.

Usage: scripts/wrk_bodies.py [--people 18750] [--seconds 6] [--rounds 5]
(18,750 people a wrk thread is the soak's share: 300,000 people an instance over 16 threads.)
Needs wrk and nginx (apt-get install wrk nginx-light). Loopback only; bounded by --seconds × 6 × --rounds.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the checkout for the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_http import free_port, wait_port  # noqa: E402

BODY_PREQUEUE = ('{"event":"tour-2026-stadium","name":"The 2026 Stadium Tour","state":"prequeue","position":null,'
                 '"number":null,"eta_seconds":null,"eta_low_seconds":null,"eta_high_seconds":null,"eta_basis":null,'
                 '"reach_position":null,"beyond_reach":false,"in_line":0,"refresh_seconds":20,'
                 '"opens_at":"2026-12-06T07:03:24Z","stopped":"not_open","store_ok":true,"updated_at":"$time_iso8601",'
                 '"next":null}')
BODY_WAITING = ('{"event":"tour-2026-stadium","name":"The 2026 Stadium Tour","state":"waiting","position":$cookie_p,'
                '"number":$cookie_n,"eta_seconds":$cookie_e,"eta_low_seconds":96,"eta_high_seconds":277,'
                '"eta_basis":"configured","reach_position":null,"beyond_reach":false,"in_line":592000,'
                '"refresh_seconds":20,"opens_at":null,"stopped":null,"store_ok":true,"updated_at":"$time_iso8601",'
                '"next":null}')

NGINX = """worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp};
  scgi_temp_path {tmp};
  server {{ listen 127.0.0.1:{p1}; location / {{ default_type application/json; add_header cache-control no-store;
    add_header waitroom-state prequeue; return 200 '{b1}'; }} }}
  server {{ listen 127.0.0.1:{p2}; location / {{ default_type application/json; add_header cache-control no-store;
    add_header waitroom-state waiting; return 200 '{b2}'; }} }}
}}
"""

# The soak's poll request shape (its LUA_POLL), each person's request formatted once, round robin, kept two ways:
# as Lua strings in a table (the soak until c71cda3), or in one C buffer with the collector's pause at 120 (the soak
# since: a small Lua heap, swept soon). Each person's cookie also carries their place, number and wait for nginx to
# answer with.
PEOPLE = r"""
local function people(count)
  math.randomseed(7)
  local out = {}
  for k = 1, count do
    local p = math.random(1, 592000)
    out[k] = "waitroom_session=" .. string.format("%022d", k * 7 + 1)
      .. ".1.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG; p=" .. p .. "; n=" .. (p + 8000)
      .. "; e=" .. math.floor(p * 60 / 2000)
  end
  return out
end
local function format(cookie)
  return wrk.format("GET", "/waitroom/status", { ["Cookie"] = cookie, ["Accept"] = "application/json" })
end
"""
LUA = PEOPLE + r"""
local cookies, reqs, n, i = {}, {}, 0, 0
init = function(args)
  cookies = people(tonumber(args[1]))
  n = #cookies
end
request = function()
  i = i % n + 1
  local r = reqs[i]
  if not r then
    r = format(cookies[i])
    reqs[i] = r
  end
  return r
end
"""
LUA_BUFFER = PEOPLE + r"""
local ffi = require("ffi")
local SLOT = 384
local reqs, lens, n, i
init = function(args)
  local cookies = people(tonumber(args[1]))
  n = #cookies
  reqs, lens = ffi.new("char[?]", n * SLOT), ffi.new("int32_t[?]", n)
  for k = 1, n do
    local r = format(cookies[k])
    ffi.copy(reqs + (k - 1) * SLOT, r, #r)
    lens[k - 1] = #r
  end
  cookies = nil
  collectgarbage()
  collectgarbage("setpause", 120)
end
request = function()
  i = (i or 0) % n + 1
  return ffi.string(reqs + (i - 1) * SLOT, lens[i - 1])
end
"""
RESPONSE = r"""
response = function(status, headers, body)
  local v = headers["set-cookie"] or headers["Set-Cookie"]
  if not v then return end
end
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--people", type=int, default=18750)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for tool, pkg in (("wrk", "wrk"), ("nginx", "nginx-light"), ("taskset", "util-linux")):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"{tool} is missing: apt-get install {pkg}")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    tmp = tempfile.mkdtemp(prefix="wrk-bodies-")
    p1, p2 = free_port(), free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX.format(tmp=tmp, p1=p1, p2=p2, b1=BODY_PREQUEUE, b2=BODY_WAITING))
    scripts = {}
    for shape, text in (("Lua strings, with a response function (the soak until c71cda3)", LUA + RESPONSE),
                        ("Lua strings, without one", LUA),
                        ("one C buffer, the collector's pause at 120, with a response function (the soak since)",
                         LUA_BUFFER + RESPONSE)):
        path = os.path.join(tmp, f"{len(scripts)}.lua")
        with open(path, "w") as f:
            f.write(text)
        scripts[shape] = path
    # One worker on the second core; wrk on the first.
    ng = subprocess.Popen(["taskset", "-c", "1", nginx_bin, "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        wait_port(p1, ng, "nginx", 10)
        wait_port(p2, ng, "nginx", 10)
        got = {(s, b): [] for s in scripts for b in ("prequeue", "waiting")}
        for k in range(args.rounds):
            for shape, path in scripts.items():
                for body, port in (("prequeue", p1), ("waiting", p2)):
                    out = subprocess.run(
                        ["taskset", "-c", "0", "wrk", "-t1", "-c8", f"-d{args.seconds}s", "-s", path,
                         f"http://127.0.0.1:{port}", "--", str(args.people)],
                        capture_output=True, text=True, timeout=args.seconds + 120)
                    rate = next((float(line.split()[1]) for line in out.stdout.splitlines()
                                 if line.startswith("Requests/sec")), None)
                    if rate is None:
                        sys.exit(f"wrk gave no rate:\n{out.stdout}\n{out.stderr}")
                    got[(shape, body)].append(rate)
            print(f"  round {k + 1}: " + ", ".join(f"{v[-1]:,.0f}" for v in got.values()), flush=True)
    finally:
        ng.terminate()
        try:
            ng.wait(10)
        except subprocess.TimeoutExpired:
            ng.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"wrk, one thread on one core, {args.people:,} people round robin, {args.rounds} interleaved runs of "
          f"{args.seconds} s (medians):")
    print("| wrk script | requests/s, the same answer (pre-queue) | requests/s, each person's own (waiting) | "
          "waiting / pre-queue | every run's ratio |")
    print("|---|---|---|---|---|")
    for shape in scripts:
        a, b = got[(shape, "prequeue")], got[(shape, "waiting")]
        ratios = sorted(y / x for x, y in zip(a, b))
        print(f"| {shape} | {statistics.median(a):,.0f} | {statistics.median(b):,.0f} | "
              f"{statistics.median(b) / statistics.median(a):.2f} | {', '.join(f'{r:.2f}' for r in ratios)} |")


if __name__ == "__main__":
    main()
