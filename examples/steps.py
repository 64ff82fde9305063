"""Durable steps from Python: each `flow step` runs its command once and records stdout and the
exit code; if the run is replayed (after an agent dies, say), the recorded result comes back
without running the command again.

    npx flow submit examples/steps.py --follow
"""
import json
import subprocess


def step(name, *cmd):
    """Runs `cmd` as the durable step `name` and returns its stdout."""
    done = subprocess.run(["flow", "step", name, "--", *cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"step {name} failed with exit code {done.returncode}")
    return done.stdout


numbers = json.loads(step("fetch", "python3", "-c", "import json; print(json.dumps(list(range(1, 11))))"))
total = int(step("sum", "python3", "-c", f"print(sum({numbers}))"))
print(f"sum of {len(numbers)} numbers is {total}")
subprocess.run(["flow", "output", "set", f"total={total}"], check=True)
