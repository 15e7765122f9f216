"""The provider registry: built-ins declare themselves, the rest is derived from the declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudddp.errors import CloudDDPError
from cloudddp.providers import registry
from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.spec import Section, job_spec_model


class TinySettings(Section):
    queue: str = "default"


def tiny(**changes: object) -> ProviderInfo:
    fields: dict[str, object] = {"name": "tiny", "summary": "a test provider", "settings": TinySettings,
                                 "options": (Option("--queue", "queue"),), "factory": "tiny_module:create"}  # fmt: skip
    fields.update(changes)
    return ProviderInfo(**fields)  # type: ignore[arg-type]


def test_the_built_in_providers_are_found_by_scanning_their_folders() -> None:
    found = registry.providers()
    assert next(iter(found)) == "local"  # the default comes first
    assert {"local", "sagemaker", "oci"} <= set(found)
    assert found["local"].interrupt_stops_job and not found["sagemaker"].interrupt_stops_job


def test_the_job_spec_has_one_section_per_provider_from_its_settings_model() -> None:
    fields = job_spec_model().model_fields
    for name, info in registry.providers().items():
        assert fields[name].annotation is info.settings


def test_declaring_a_provider_imports_no_sdk() -> None:
    import subprocess
    import sys

    code = "import sys; from cloudddp.providers import registry; registry.providers(); " \
           "print(sorted({'boto3', 'oci', 'kubernetes', 'torch'} & set(sys.modules)))"  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_an_unknown_provider_is_one_sentence_listing_the_known_ones() -> None:
    with pytest.raises(CloudDDPError, match=r"unknown provider 'nope'; choose one of: local, "):
        registry.get("nope")


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"settings": dict}, "subclass of cloudddp.spec.Section"),
        ({"options": (Option("--queue", "qeue"),)}, "sets 'qeue', which TinySettings does not have"),
        ({"options": (Option("--queue", "queue", type=list),)}, "of type str, int, float or bool"),
        ({"options": (Option("queue", "queue"),)}, "a --flag"),
        ({"name": "Tiny-One"}, "lower-case Python identifier"),
        ({"factory": ""}, "factory is empty"),
    ],
)
def test_a_declaration_that_does_not_fit_names_its_origin_and_problem(changes: dict, fragment: str) -> None:
    with pytest.raises(CloudDDPError, match="my origin: ") as caught:
        registry.check_declaration(tiny(**changes), "my origin")
    assert fragment in str(caught.value)


def test_a_missing_sdk_is_a_pip_hint_naming_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "needs_sdk.py").write_text("import some_missing_sdk_xyz\ndef create(): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(CloudDDPError, match=r"the tiny provider needs the Python package 'some_missing_sdk_xyz': "
                                            r"pip install 'cloudddp\[tiny\]'"):  # fmt: skip
        tiny(factory="needs_sdk:create").create()
