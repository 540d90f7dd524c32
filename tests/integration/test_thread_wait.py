"""How llama.cpp's threads wait is set before the library loads, per command, and the user's own
OpenMP variables win (llama/thread_wait.py). Each case runs in a fresh interpreter: libgomp reads
its environment once per process, and this test process loaded it long ago."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specllama.llama import thread_wait
from specllama.runtime import cost_store as cache
from tests.support.one_line import ENV, NEVER, one_error_line

OPENMP = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", thread_wait.ENV, "SPECLLAMA_THREAD_WAIT_APPLIED")

# What a process sees in its environment at the moment llama_cpp (and so libgomp) is loaded, after
# whatever specllama decided: the environment libgomp reads.
PROBE = """
import json, os, sys, builtins
seen = {}
real_import = builtins.__import__
def spy(name, *a, **k):
    if name == "llama_cpp" and not seen:
        seen.update({v: os.environ.get(v) for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")})
    return real_import(name, *a, **k)
builtins.__import__ = spy
sys.argv = ["specllama"] + sys.argv[1:]
from specllama.cli.main import main
code = main()
print("PROBE" + json.dumps(seen))
sys.exit(code)
"""


def probe(*argv: str, **env: str) -> tuple[dict, subprocess.CompletedProcess]:
    clean = {k: v for k, v in ENV.items() if k not in OPENMP}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBE")]
    return (json.loads(line[0][5:]) if line else {}), done


SPIN = {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": str(thread_wait.SPIN_COUNT)}
SLEEP = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": None}


def test_commands_choose_a_level_by_default(tiny_models):
    # `auto` reads the machine's load, which this shared machine's neighbours set: either level, never none.
    seen, done = probe("run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-q", "hi")
    assert done.returncode == 0, done.stderr
    assert seen in (SPIN, SLEEP)


def test_thread_wait_spin(tiny_models):
    seen, done = probe("run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-q", "hi", "--thread-wait", "spin")
    assert done.returncode == 0, done.stderr
    assert seen == SPIN


def test_auto_spins_only_on_cores_nobody_else_uses():
    assert thread_wait.decide(busy=0.1, cores=2, threads=2) == "spin"
    assert thread_wait.decide(busy=0.9, cores=2, threads=2) == "sleep"  # a build, another model
    assert thread_wait.decide(busy=0.9, cores=8, threads=4) == "spin"  # it runs on the cores we leave free
    assert thread_wait.decide(busy=4.5, cores=8, threads=4) == "sleep"
    assert thread_wait.busy_cores((100, 400), (150, 600), cores=2) == 0.5


def test_thread_wait_sleep_is_openmp_passive(tiny_models):
    seen, done = probe("run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-q", "hi", "--thread-wait", "sleep")
    assert done.returncode == 0, done.stderr
    assert seen == SLEEP


def test_the_environment_variable_chooses_too(tiny_models):
    seen, done = probe("run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-q", "hi", SPECLLAMA_THREAD_WAIT="sleep")
    assert done.returncode == 0, done.stderr
    assert seen["OMP_WAIT_POLICY"] == "PASSIVE"


def test_the_users_own_openmp_variables_win(tiny_models):
    seen, done = probe("run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-q", "hi", "--thread-wait", "sleep",
                       OMP_WAIT_POLICY="ACTIVE")
    assert done.returncode == 0, done.stderr
    assert seen == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": None}


def test_a_child_of_a_configured_process_chooses_its_own_level(tiny_models):
    # The parent's variables carry the mark: they are not the user's, so the child's option applies.
    parent = {"GOMP_SPINCOUNT": str(thread_wait.SPIN_COUNT), "SPECLLAMA_THREAD_WAIT_APPLIED": "spin"}
    seen, done = probe("run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-q", "hi", "--thread-wait", "sleep", **parent)
    assert done.returncode == 0, done.stderr
    assert seen == SLEEP


def test_an_unknown_level_is_one_line_and_exit_2():
    _, done = probe("run", "-m", NEVER, "hi", SPECLLAMA_THREAD_WAIT="fast")
    assert done.returncode == 2
    one_error_line(done.stderr, "unknown thread wait level 'fast'", "auto, spin, sleep")


def test_reports_and_cost_keys_name_the_level():
    # This process loaded llama.cpp under one level: a later configure() cannot change it and says so.
    before = thread_wait.in_force()
    assert thread_wait.configure("sleep" if before.startswith("spin") else "spin") in (before, "fixed", "user")
    assert thread_wait.in_force() == before
    cost_key = cache.key_for(Path(__file__), None, threads=2, threads_batch=2, gpu_layers=0, exact=False, max_n=16)
    assert cost_key["thread_wait"] == thread_wait.key() == thread_wait._chosen  # the level, never auto's reason




def test_auto_s_reason_stays_out_of_the_cost_key(monkeypatch):
    # Costs learnt under spinning threads must serve the next run that spins, whatever load auto saw.
    monkeypatch.setattr(thread_wait, "_chosen", "spin")
    for reason in ("0.1 of 2 cores busy elsewhere", "0.2 of 2 cores busy elsewhere"):
        monkeypatch.setattr(thread_wait, "_reason", reason)
        assert thread_wait.key() == "spin"
        assert reason in thread_wait.in_force()
