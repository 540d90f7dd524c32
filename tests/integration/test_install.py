"""specllama installed as a wheel, the way pip, pipx and uv tool install it, works outside the
checkout: the registry is package data, the user's models.toml in the config folder is layered over
it, and a completion runs with the installed `specllama` from a folder that is not the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def copy_sources(source: Path) -> Path:
    """What a build reads, copied: building writes build/ and *.egg-info, never into the checkout."""
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "models.toml"):
        shutil.copy(REPO / name, source / name)
    (source / "_custom_build").mkdir()
    shutil.copy(REPO / "_custom_build" / "build_backend.py", source / "_custom_build")
    shutil.copytree(REPO / "specllama", source / "specllama", ignore=shutil.ignore_patterns("__pycache__"))
    return source


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A wheel built from a copy of the sources, installed into a fresh venv that borrows only the
    third-party packages (llama-cpp-python, numpy, textual, ...) of the venv running the tests."""
    root = tmp_path_factory.mktemp("install")
    source = copy_sources(root / "source")
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--disable-pip-version-check", "-w", str(dist), str(source)], check=True, timeout=300)
    wheel = next(dist.glob("specllama-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # Dependencies from the test venv, after the new venv's own site-packages (which wins for specllama).
    Path(purelib, "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", "--disable-pip-version-check", str(wheel)], check=True, timeout=300)
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECLLAMA_CONFIG", "VIRTUAL_ENV")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
               SPECLLAMA_CACHE=str(root / "cache"))
    return {"wheel": wheel, "venv": venv, "python": python, "bin": venv / "bin" / "specllama", "env": env,
            "cwd": home}


def run_installed(installed: dict, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(installed["bin"]), *argv], cwd=installed["cwd"], env=installed["env"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def test_the_registry_is_at_the_top_of_the_checkout_and_inside_the_wheel(installed):
    assert (REPO / "models.toml").is_file() and not (REPO / "specllama" / "models" / "models.toml").exists()
    with zipfile.ZipFile(installed["wheel"]) as zf:
        assert zf.read("specllama/models/models.toml") == (REPO / "models.toml").read_bytes()


def test_a_checkout_reads_the_top_level_registry():
    from specllama.models.registry import SHIPPED_REGISTRY, load_registry

    assert Path(str(SHIPPED_REGISTRY)) == REPO / "models.toml"
    assert load_registry(user=REPO / "no-such-user-file.toml").default_pair


def test_an_sdist_carries_the_registry_so_its_wheel_does_too(tmp_path):
    """pip builds a wheel from an sdist when it has no wheel: the file must travel in it."""
    source, out = copy_sources(tmp_path / "source"), tmp_path / "sdist"
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '_custom_build'); import build_backend; "
                    f"print(build_backend.build_sdist({str(out)!r}))"], cwd=source, check=True, timeout=300,
                   capture_output=True, text=True)

    with tarfile.open(next(out.glob("specllama-*.tar.gz"))) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"models.toml", "_custom_build/build_backend.py", "pyproject.toml"} <= names


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    where = subprocess.run([str(installed["python"]), "-c", "import specllama; print(specllama.__file__)"],
                           cwd=installed["cwd"], env=installed["env"], capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(installed["venv"]), where.stdout
    assert not Path(where.stdout.strip()).is_relative_to(REPO)


def test_models_list_reads_the_packaged_registry_and_the_users_file(installed, tiny_models):
    config = Path(installed["env"]["XDG_CONFIG_HOME"]) / "specllama"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(f'[models.tiny]\npath = "{tiny_models["a"]}"\nrole = "target"\n')
    listed = run_installed(installed, "models", "list")
    assert listed.returncode == 0, listed.stderr
    assert "qwen2.5-coder-1.5b" in listed.stdout and "tiny" in listed.stdout  # shipped, then the user's
    assert str(config / "models.toml") in listed.stdout


def test_the_installed_command_completes_a_prompt_outside_the_checkout(installed, tiny_models):
    config = Path(installed["env"]["XDG_CONFIG_HOME"]) / "specllama"
    config.mkdir(parents=True, exist_ok=True)
    (config / "models.toml").write_text(f'[models.tiny]\npath = "{tiny_models["a"]}"\nrole = "target"\n')
    done = run_installed(installed, "run", "-m", "tiny", "--no-draft", "-n", "4", "-c", "256", "--json", "hello")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert 1 <= answer["tokens"] <= 4 and answer["target"] == tiny_models["a"].name and answer["drafter"] == "none"
