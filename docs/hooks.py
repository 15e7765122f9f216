"""MkDocs hooks: the reference pages written from the code at build time (nothing generated is committed).

- `reference/job-spec.md`: the job spec's fields from the pydantic model's JSON schema (`cloudddp.job_spec.job_spec_model`),
  each provider section's flags from its declaration (`cloudddp.providers.registry`).
- `reference/environment.md`: the job-side environment contracts, the docstrings of the `cloudddp.cluster` modules.
- `reference/launcher.md`: the argparse help of `cloudddp-launch`.
- `benchmarks/RESULTS-*.md`: the benchmark logs, as they are in the repository.

The `cloudddp` command itself is documented by mkdocs-click (`reference/cli.md`), from `cloudddp.cli:click_command`.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
WIDTH = "100"  # argparse wraps help to $COLUMNS: the same page on every machine


def on_files(files: Files, config: Any) -> Files:
    for path, content in generated_pages().items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_content(html: str, page: Any, **_: Any) -> str:
    """The CLI's help is written for rich (`[bold]Examples[/bold]`): shown in bold, not as brackets."""
    return re.sub(r"\[bold\](.*?)\[/bold\]", r"<strong>\1</strong>", html)


def generated_pages() -> dict[str, str]:
    pages = {
        "reference/job-spec.md": job_spec_page(),
        "reference/environment.md": environment_page(),
        "reference/launcher.md": launcher_page(),
        "reference/json-output.md": json_output_page(),
    }
    for results in sorted((ROOT / "benchmarks").glob("RESULTS-*.md")):
        pages[f"benchmarks/{results.name}"] = results.read_text(encoding="utf-8")
    return pages


# -- --format json ------------------------------------------------------------------------------------------------
def json_output_page() -> str:
    from cloudddp import json_output

    intro = json_output.__doc__ or ""
    schema = json.dumps(json_output.OUTPUT_SCHEMA, indent=2)
    return (
        f"# `--format json` output\n\n{intro}\n\nThe commands: `cloudddp status JOB --format json`, `cloudddp list "
        f"--format json`, `cloudddp launch --no-wait --format json` and `cloudddp render --format json` (or "
        f"`launch --dry-run --format json`). Schema version {json_output.SCHEMA_VERSION}:\n\n"
        f"```json\n{schema}\n```\n"
    )


# -- the job spec ------------------------------------------------------------------------------------------------
def job_spec_page() -> str:
    from cloudddp.job_spec import job_spec_model
    from cloudddp.providers import registry

    schema = job_spec_model().model_json_schema()
    definitions = schema.get("$defs", {})
    launch_flags = {
        "name": "--name", "entry_point": "SCRIPT", "module": "-m, --module", "source_dir": "--source-dir",
        "nodes": "--nodes", "min_nodes": "--min-nodes", "max_restarts": "--max-restarts",
        "rdzv_backend": "--rdzv-backend", "rdzv_endpoint": "--rdzv-endpoint", "args": "after --",
        "nproc_per_node": "--nproc-per-node", "inputs": "-i, --input", "output": "--output",
        "checkpoint": "--checkpoint", "environment": "-e, --env", "hyperparameters": "-H, --hyperparameter",
        "max_runtime": "--max-runtime",
    }  # fmt: skip
    from cloudddp.cli import click_command

    launch = click_command.commands["launch"]
    param_help = {param.name: getattr(param, "help", "") or "" for param in launch.params}
    flag_param = {"inputs": "input", "environment": "env", "hyperparameters": "hyperparameter", "args": "script_args"}
    base_help = {field: param_help.get(flag_param.get(field, field), "") for field in launch_flags}
    base_help["entry_point"] = param_help.get("script", "")
    lines = [
        "# Job spec reference",
        "",
        "Written at build time from the pydantic model (`cloudddp.job_spec.job_spec_model()`, its JSON schema) and the",
        "providers' declarations. The spec is what `cloudddp launch -f job.yaml` reads (flags override it), and what",
        "`Estimator(...)` builds from its keyword arguments. Unknown fields are errors at every level. See",
        "[Launching jobs](../launching.md) for how YAML values are read.",
        "",
        "## Top-level fields",
        "",
        *field_table(schema, definitions, launch_flags, helps=base_help, provider_sections=registry.names()),
    ]
    for name, info in registry.providers().items():
        flags = {option.field: option.flag for option in info.options}
        section = resolve(schema["properties"][name], definitions)
        lines += [
            "",
            f"## `{name}:` ({info.display_title}) {{#{name}}}",
            "",
            f"{info.summary}. Elastic jobs (`--nodes MIN:MAX`): {'yes' if info.supports_elastic else 'no'}.",
            "",
            *field_table(section, definitions, flags, helps={o.field: o.help for o in info.options}),
        ]
    lines += [
        "",
        "## The JSON schema",
        "",
        "For editors and validators (`cloudddp launch` validates with the model itself):",
        "",
        '??? note "job-spec.schema.json"',
        "",
        "    ```json",
        *("    " + line for line in json.dumps(schema, indent=2, sort_keys=True).splitlines()),
        "    ```",
        "",
    ]
    return "\n".join(lines)


def resolve(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return definitions[ref.rsplit("/", 1)[-1]] if ref else node


def type_of(node: dict[str, Any], definitions: dict[str, Any]) -> str:
    if "$ref" in node:
        return f"`{node['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in node:
        kinds = [type_of(option, definitions) for option in node["anyOf"] if option.get("type") != "null"]
        optional = any(option.get("type") == "null" for option in node["anyOf"])
        return " or ".join(kinds) + (" (optional)" if optional else "")
    if "enum" in node:
        values = [f"`{value}`" for value in node["enum"]]
        return values[0] if len(values) == 1 else ", ".join(values[:-1]) + f" or {values[-1]}"
    if node.get("type") == "array":
        return f"list of {type_of(node.get('items', {}), definitions)}"
    if node.get("type") == "object":
        values = node.get("additionalProperties")
        return f"map of {type_of(values, definitions)}" if isinstance(values, dict) else "object"
    text = str(node.get("type", "any"))
    bounds = [f"≥ {node['minimum']}" if "minimum" in node else "", f"≤ {node['maximum']}" if "maximum" in node else ""]
    return text + "".join(f" {bound}" for bound in bounds if bound)


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def field_table(
    model: dict[str, Any],
    definitions: dict[str, Any],
    flags: dict[str, str],
    helps: dict[str, str] | None = None,
    provider_sections: list[str] | None = None,
) -> list[str]:
    required = set(model.get("required", []))
    rows = ["| field | type | default | flag | description |", "| --- | --- | --- | --- | --- |"]
    for field, node in model.get("properties", {}).items():
        if provider_sections and field in provider_sections:
            rows.append(f"| `{field}` | section | | | [the {field} section](#{field}) |")
            continue
        default = (
            "required" if field in required else f"`{json.dumps(node.get('default'))}`" if "default" in node else ""
        )
        flag = flags.get(field, "")
        description = node.get("description") or (helps or {}).get(field, "")
        rows.append(
            f"| `{field}` | {cell(type_of(node, definitions))} | {cell(default)} | {cell(f'`{flag}`' if flag else '')} "
            f"| {cell(description)} |"
        )
    return rows


# -- the job-side environment contracts ------------------------------------------------------------------------
def docstring(module: str) -> str:
    path = ROOT / "cloudddp" / "cluster" / f"{module}.py"
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def environment_page() -> str:
    from cloudddp import cluster

    order = [m.__name__.rsplit(".", 1)[-1] for m in cluster.ENVIRONMENTS]
    lines = [
        "# Job-side environment contracts",
        "",
        "What `cloudddp-launch` reads on every node, platform by platform, and what the local provider writes when it",
        "emulates one. Written at build time from the module docstrings of `cloudddp/cluster/` (standard library only:",
        "this package runs inside training images). Detection tries the platforms in this fixed order:",
        f"{', '.join(f'`{name}`' for name in order)}, then `standalone`. The summary table is in",
        "[The job-side launcher](../guides/launcher.md#detection).",
        "",
        "## The contract every platform module keeps",
        "",
        demote(docstring("__init__")),
        "",
        demote(docstring("environment")),
    ]
    for module in [*order, "standalone"]:
        module_file = f"cloudddp/cluster/{module}.py"
        lines += ["", f"## `{module}` (`{module_file}`)", "", demote(docstring(module))]
    helpers = ["plan", "options", "hostlist", "netif", "sagemaker_toolkit_env"]
    lines += ["", "## Helpers", ""]
    for module in helpers:
        lines += [f"### `cloudddp/cluster/{module}.py`", "", demote(docstring(module)), ""]
    return "\n".join(lines)


def demote(text: str) -> str:
    """Docstrings are plain text: keep URLs as links and lists as lists."""
    return re.sub(r"(?<![(<`])(https?://[^\s)>`]+[^\s)>`.,;:])", r"<\1>", text)


# -- argparse commands --------------------------------------------------------------------------------------------
def argparse_help(parser_factory: Any) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return str(parser_factory().format_help())
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def launcher_page() -> str:
    from cloudddp.launcher.cli import build_parser

    return "\n".join(
        [
            "# `cloudddp-launch`",
            "",
            "The job-side launcher (also `python -m cloudddp.launcher`), run on every node. Its help, as",
            "`cloudddp-launch -h` prints it:",
            "",
            "```text",
            argparse_help(build_parser).rstrip(),
            "```",
            "",
            "Detection, supervision, fail-fast and the `--dry-run` output: [The job-side launcher](../guides/launcher.md).",
            "",
        ]
    )
