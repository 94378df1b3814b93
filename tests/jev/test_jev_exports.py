import inspect

import jevrefine.jev as jev
from jevrefine.testing import FakeJevServer


def test_all_is_sorted_and_complete() -> None:
    assert jev.__all__ == sorted(jev.__all__)
    for name in jev.__all__:
        assert hasattr(jev, name), name


def test_every_public_class_and_function_has_a_docstring() -> None:
    for name in jev.__all__:
        value = getattr(jev, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
            for member_name, member in vars(value).items() if inspect.isclass(value) else ():
                if member_name.startswith("_") or not callable(member):
                    continue
                assert inspect.getdoc(member), f"{name}.{member_name}"


def test_fake_server_is_exported_lazily() -> None:
    assert FakeJevServer.__module__ == "jevrefine.testing._jev_server"
    assert inspect.getdoc(FakeJevServer)
