"""The spec's site defaults, declared once: every job option marked ``spec=True`` in
core/options.py is a spec field of the same name, with the option's own type and checks
(a spec's ``"qos": "bad name"`` is refused as ``--qos`` is, at load), optional (unset: the
option's default applies; login/submission/resolve.py merges flag > spec > default). A new site
default is one ``spec=True`` on its option, nothing here.

JSON has lists where an option has a tuple (``sbatch_args``): those fields take a list too; the
rest stay as strict as the spec (``"exclusive": "yes"`` is no bool)."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from ..core.options import JobOptions

SPEC_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


def is_site_default(info: FieldInfo) -> bool:
    return isinstance(info.json_schema_extra, dict) and bool(info.json_schema_extra.get("spec"))


def _spec_field(info: FieldInfo) -> tuple[Any, Any]:
    annotation = info.rebuild_annotation()  # the option's type with its checks (Annotated metadata)
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    default = extra.get("spec_unset", info.default)  # (python: None, "the submitter's")
    described = f"site default of the job option: {extra['help']}" if extra.get("help") else None
    lists = isinstance(info.default, tuple)  # a JSON list
    typed = annotation if default is not None else annotation | None
    return typed, Field(default, strict=False if lists else None, description=described)


def site_default_names() -> list[str]:
    """The options whose default a spec may set (its fields of the same names)."""
    return [name for name, info in JobOptions.model_fields.items() if is_site_default(info)]


_FIELDS: dict[str, Any] = {name: _spec_field(JobOptions.model_fields[name]) for name in site_default_names()}
if typing.TYPE_CHECKING:
    SiteDefaults = BaseModel
else:
    SiteDefaults = create_model("SiteDefaults", __config__=SPEC_CONFIG, **_FIELDS)
