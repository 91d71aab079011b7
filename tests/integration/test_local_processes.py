"""Local processes never outlive the program that started them (epochal.runtime.processes).

Proves: a child started from a thread that then ends keeps running (the kernel's parent-death
signal follows the thread that started a child, so every child is started from one thread that
lives as long as the program), and gets SIGTERM as soon as that program is SIGKILLed; a child
whose parent died before it asked for the signal notices and exits at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from epochal.runtime.processes import EXIT_PARENT_GONE, PARENT_PID_ENV
from tests.harness import Pid, block_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

# The child: asks to die with its parent, says so, and logs the SIGTERM it gets.
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from epochal.runtime.processes import die_with_parent
    def terminated(signum, frame):
        print("got SIGTERM", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, terminated)
    die_with_parent()
    print("ready", flush=True)
    while True:
        signal.pause()
    """
)

# The parent: starts the child from a thread that waits until the child is ready and ends;
# once that thread is gone from /proc, it prints the child's pid and waits to be killed.
PARENT = textwrap.dedent(
    """
    import os, sys, threading, time
    from pathlib import Path
    from epochal.runtime.processes import LocalProcess
    child = LocalProcess("child", "", Path(sys.argv[1]))
    def starter():
        child.start([sys.executable, "-c", sys.argv[2]])
        while "ready" not in child.log_path.read_text():
            time.sleep(0.01)
        starter_tid.append(threading.get_native_id())
    starter_tid = []
    thread = threading.Thread(target=starter)
    thread.start()
    thread.join()
    while Path(f"/proc/self/task/{starter_tid[0]}").exists():
        time.sleep(0.01)
    print(child.pid, flush=True)
    sys.stdin.read()
    """
)


def test_a_child_outlives_its_starting_thread_and_dies_with_its_parent(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(log), CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    child: Pid | None = None
    try:
        assert parent.stdout is not None
        child = Pid.of(int(parent.stdout.readline()))
        # The starting thread is gone. A parent-death signal would already have been sent;
        # signals arrive within microseconds, so a child alive and quiet for a second after
        # that got none.
        watched_until = time.monotonic() + 1.0
        while time.monotonic() < watched_until:
            assert child.alive and "SIGTERM" not in log.read_text(), log.read_text()
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        block_until("the child exits after its parent was killed", lambda: not child.alive, 10)
        assert "got SIGTERM" in log.read_text(), log.read_text()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child is not None:
            child.kill()


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    # As if the parent had died between starting the child and the child's request: its
    # parent is no longer the process the environment names.
    not_the_parent = os.getpid() + 1 if os.getpid() + 1 != os.getppid() else os.getpid() + 2
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from epochal.runtime.processes import die_with_parent; "
            "die_with_parent(); print('ran on')",
        ],
        env={**os.environ, PARENT_PID_ENV: str(not_the_parent)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == EXIT_PARENT_GONE, result
    assert "ran on" not in result.stdout
    assert "is gone; exiting" in result.stderr
