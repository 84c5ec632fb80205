#!/usr/bin/env python3
"""tests/gen/loadtest.py URL PID SECONDS CLIENTS: a load test of `PROG serve`.

CLIENTS threads send completions for SECONDS, each in a loop: streamed and
not in turn, of 8, 16 or 24 tokens, every fifth one left after 50 ms (its
client goes away). Every other request must answer 200 with a whole
response (a stream ends with data: [DONE]). The server's resident memory
(/proc/PID/status VmRSS) is sampled at a third of the time and at the end.
Prints "requests N left L failed F rss A B" (kB) and the first failures;
exits 1 when one failed or none ran."""
import json
import sys
import threading
import time
import urllib.request

url, pid, secs, nclients = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
lock = threading.Lock()
count = {"ok": 0, "left": 0}
fails = []


def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def client(i):
    end = time.time() + secs
    n = 0
    while time.time() < end:
        stream = n % 2 == 1
        body = {"prompt": "the cat sat", "max_tokens": 8 + 8 * (n % 3), "stream": stream,
                "seed": i * 1000 + n}
        req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        leave = n % 5 == 4
        n += 1
        try:
            with urllib.request.urlopen(req, timeout=0.05 if leave else 60) as r:
                data = r.read().decode("utf-8")
                status = r.status
        except Exception as e:
            with lock:
                if leave:
                    count["left"] += 1
                else:
                    fails.append(f"client {i}: {e!r}")
            continue
        good = status == 200 and (data.rstrip().endswith("data: [DONE]") if stream
                                  else "finish_reason" in json.loads(data)["choices"][0])
        with lock:
            if good:
                count["ok"] += 1
            elif not leave:
                fails.append(f"client {i}: status {status}: {data[:200]}")


threads = [threading.Thread(target=client, args=(i,)) for i in range(nclients)]
for t in threads:
    t.start()
time.sleep(secs / 3)
mid = rss()
for t in threads:
    t.join()
time.sleep(0.3)                         # the last retirements
last = rss()
print(f"requests {count['ok']} left {count['left']} failed {len(fails)} rss {mid} {last}")
for f in fails[:5]:
    print(f)
sys.exit(1 if fails or not count["ok"] else 0)
