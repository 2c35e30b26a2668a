"""proofcheck.allocator: which allocator the launched processes get, from the setting and what is installed,
and the environment that preloads it (in front of a preload already set, never twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proofcheck.allocator import (
    ENV_VAR,
    INSTALL_HINT,
    QUIET,
    TCMALLOC_NAME,
    choose_allocator,
    find_tcmalloc,
    loaded_allocator,
)


@pytest.fixture()
def lib_dirs(tmp_path: Path) -> tuple[tuple[str, ...], str]:
    """Two library folders, TCMalloc in the second: (the folders, the library's path)."""
    empty, holder = tmp_path / "empty", tmp_path / "lib"
    empty.mkdir()
    holder.mkdir()
    (holder / TCMALLOC_NAME).write_bytes(b"\x7fELF")
    return (str(empty), str(holder)), str(holder / TCMALLOC_NAME)


@pytest.mark.parametrize("setting", ["", "tcmalloc", "  tcmalloc "])
def test_tcmalloc_is_chosen_where_installed(lib_dirs: tuple[tuple[str, ...], str], setting: str) -> None:
    dirs, lib = lib_dirs
    choice = choose_allocator(setting, dirs)
    assert (choice.name, choice.library) == ("tcmalloc", lib)
    assert choice.env({}) == {"LD_PRELOAD": lib, **QUIET}


def test_unset_and_absent_falls_to_glibc_and_says_what_to_install(tmp_path: Path) -> None:
    choice = choose_allocator("", (str(tmp_path),))
    assert (choice.name, choice.library, choice.env({})) == ("glibc", None, {})
    assert INSTALL_HINT in choice.reason


def test_asked_for_and_absent_is_an_error_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"{ENV_VAR}=tcmalloc .*{INSTALL_HINT}.*{ENV_VAR}=glibc"):
        choose_allocator("tcmalloc", (str(tmp_path),))


def test_glibc_preloads_nothing_even_where_tcmalloc_is_installed(lib_dirs: tuple[tuple[str, ...], str]) -> None:
    choice = choose_allocator("glibc", lib_dirs[0])
    assert (choice.name, choice.library, choice.env({"LD_PRELOAD": "/x.so"})) == ("glibc", None, {})


def test_a_library_path_is_preloaded_as_given(tmp_path: Path) -> None:
    lib = tmp_path / "libjemalloc.so.2"
    lib.write_bytes(b"\x7fELF")
    choice = choose_allocator(str(lib), ())
    assert (choice.name, choice.library) == ("libjemalloc.so.2", str(lib))


@pytest.mark.parametrize("setting", ["jemalloc", "/no/such/lib.so"])
def test_an_unknown_setting_is_an_error_naming_the_choices(setting: str) -> None:
    with pytest.raises(ValueError, match="use tcmalloc, glibc or the path"):
        choose_allocator(setting, ())


@pytest.mark.parametrize(("current", "expected"), [
    ("", "{lib}"),
    ("/opt/other.so", "{lib}:/opt/other.so"),   # ours first, the caller's kept
])
def test_the_preload_goes_in_front_of_the_one_already_set(lib_dirs: tuple[tuple[str, ...], str], current: str,
                                                          expected: str) -> None:
    dirs, lib = lib_dirs
    env = choose_allocator("", dirs).env({"LD_PRELOAD": current})
    assert env["LD_PRELOAD"] == expected.format(lib=lib)


def test_a_preload_already_in_place_is_not_added_twice(lib_dirs: tuple[tuple[str, ...], str]) -> None:
    dirs, lib = lib_dirs
    assert choose_allocator("", dirs).env({"LD_PRELOAD": f"/opt/a.so:{lib}"}) == QUIET


def test_the_environment_variable_is_the_default_setting(lib_dirs: tuple[tuple[str, ...], str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "glibc")
    assert choose_allocator(None, lib_dirs[0]).name == "glibc"
    monkeypatch.delenv(ENV_VAR)
    assert choose_allocator(None, lib_dirs[0]).name == "tcmalloc"


def test_find_looks_in_the_folders_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for d in (first, second):
        d.mkdir()
        (d / TCMALLOC_NAME).write_bytes(b"")
    assert find_tcmalloc((str(tmp_path / "none"), str(second), str(first))) == str(second / TCMALLOC_NAME)
    assert find_tcmalloc((str(tmp_path / "none"),)) is None


@pytest.mark.parametrize(("mapped", "expected"), [
    ("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10\n", "tcmalloc"),
    ("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n", "jemalloc"),
    ("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n", "glibc"),
])
def test_the_loaded_allocator_is_read_from_the_memory_map(tmp_path: Path, mapped: str, expected: str) -> None:
    maps = tmp_path / "maps"
    maps.write_text(mapped, encoding="utf-8")
    assert loaded_allocator(maps) == expected
    assert loaded_allocator(tmp_path / "absent") is None
