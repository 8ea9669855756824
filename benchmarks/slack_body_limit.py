"""What a 50 MB unsigned POST to ``/slack/events`` costs a real ``labbot serve``: its memory growth (peak RSS,
sampled every 5 ms while the request is in flight) and its log growth, next to one small signed ``/lab help``
(claims: each big unsigned request grows memory by at most 4x what the small signed one does, or by under 8 MiB,
reads at most the 1 MiB limit, and adds nothing of its body to the log).

Three big requests: 50 MB with a Content-Length and no signature; 50 MB streamed (chunked, no length) with
well-formed, fresh, forged signing headers; 50 MB streamed with no signing headers. The client is raw sockets
sending 64 KiB at a time and stopping when the server answers; "sent" is how much of the 50 MB it got out before
the answer came (what the kernel buffered, not what labbot read). Ray is pointed at a port where nothing listens:
nothing here needs it.

    .venv/bin/python benchmarks/slack_body_limit.py

Measured on the shared 2-core dev machine (RSS growth, log growth per 50 MB request): before the door
(Bolt read, verified and logged every body) about 300 MiB and 50 MB of log each, answered 401 after reading all of
it; with it 8 KiB / 1.2 MiB / 44 KiB and 0 B, answered 413 / 413 / 401, against 4 KiB for the small signed one.
"""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _harness import report
from support import Serve, free_port

from labbot.bot.slack.payloads import Workspace, signed, slash_command

SECRET = "bench-signing-secret"
BIG = 50 << 20
CHUNK = 64 << 10
MARK = b"UNSIGNED-BODY-MARKER-"


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The peak RSS of ``pid`` while the block runs, above its RSS when it began."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.base, self._stop = pid, 0, 0, threading.Event()

    def __enter__(self) -> PeakRss:
        self.base = self.peak = rss(self.pid)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss(self.pid))
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.05)
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss(self.pid))

    @property
    def growth(self) -> int:
        return self.peak - self.base


def post(port: int, headers: dict[str, str], body: bytes | None, *, chunked: bool = False) -> tuple[int, int]:
    """(status, body bytes sent before the answer). ``body`` None: 50 MB of filler, sent 64 KiB at a time."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    size = len(body) if body is not None else BIG
    head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {size}\r\n"
    sock.sendall(head.encode() + b"\r\n")
    if body is None:
        select.select([sock], [], [], 0.5)  # a door that refuses on the headers answers now, before any body
    sent = 0
    filler = MARK + b"x" * (CHUNK - len(MARK))
    try:
        while sent < size:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered: stop sending
            piece = body[sent : sent + CHUNK] if body is not None else filler[: min(CHUNK, size - sent)]
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            sent += len(piece)
        else:
            if chunked:
                sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    sock.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, sent


def main() -> None:
    fake = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_slack_fake_server.py"))], stdout=subprocess.PIPE, text=True
    )
    assert fake.stdout is not None
    api_url, bot_token, team_id, app_id, channel = fake.stdout.readline().split()
    ws = Workspace(team_id=team_id, app_id=app_id, channel=channel)
    rows: list[tuple[str, int, int, int, int]] = []
    with tempfile.TemporaryDirectory(prefix="lb-body-") as tmp:
        env = {"SLACK_BOT_TOKEN": bot_token, "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": api_url}
        serve = Serve(Path(tmp), ray_address=f"http://127.0.0.1:{free_port()}", ray_token=None, extra_env=env).start()
        assert serve.proc is not None
        pid = serve.proc.pid
        try:
            small = slash_command(ws, user="U0ALICE001", user_name="alice", text="help")
            post(serve.port, signed(small, SECRET), small.encode())  # warm-up: first-request imports and caches
            time.sleep(0.5)
            fresh = {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=" + "0" * 64}
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            cases: list[tuple[str, dict[str, str], bytes | None, bool]] = [
                ("small signed /lab help", signed(small, SECRET), small.encode(), False),
                ("50 MB unsigned, Content-Length", form, None, False),
                ("50 MB chunked, forged signature", form | fresh, None, True),
                ("50 MB chunked, unsigned", form, None, True),
            ]
            for name, headers, body, chunked in cases:
                log_before = serve.log_path.stat().st_size
                with PeakRss(pid) as mem:
                    status, sent = post(serve.port, headers, body, chunked=chunked)
                time.sleep(0.2)  # anything the request would log is written by now
                rows.append((name, status, sent, mem.growth, serve.log_path.stat().st_size - log_before))
            logged_body = MARK in serve.log_path.read_bytes()
        finally:
            serve.stop()
            fake.terminate()
            fake.wait()
    small_growth = max(rows[0][3], 4096)  # at least a page: RSS moves in pages
    print(f"{'request':<34} {'status':>6} {'sent':>10} {'RSS growth':>12} {'log growth':>11} {'RSS ratio':>10}")
    for name, status, sent, growth, log_growth in rows:
        ratio = growth / small_growth
        print(f"{name:<34} {status:>6} {sent >> 10:>8} K {growth >> 10:>10} K {log_growth:>9} B {ratio:>10.1f}")
    big = rows[1:]
    mem_ok = all(g <= max(4 * small_growth, 8 << 20) for _, _, _, g, _ in big)
    refused = [s for _, s, _, _, _ in big] == [413, 413, 401]
    log_ok = not logged_body and all(lg < 1024 for *_, lg in big)
    print(f"refused (413, 413, 401): {refused}; memory bounded: {mem_ok}; body never logged: {log_ok}")
    report(
        "slack_body_limit",
        {
            "small_signed_rss_growth_kib": rows[0][3] >> 10,
            "unsigned_50mb_rss_growth_kib": [g >> 10 for _, _, _, g, _ in big],
            "log_growth_bytes": [lg for *_, lg in big],
            "claim": "413/413/401, RSS growth <= max(4x small, 8 MiB), nothing of the body logged",
            "ok": refused and mem_ok and log_ok,
        },
    )


if __name__ == "__main__":
    main()
