"""A schema's ``$ref``s, resolved once at validation and never again (guarantee X2).

A ``$ref`` may point within the schema itself (``#/$defs/label``, an embedded ``$id``) or
to a JSON file under the project root (``schemas/common.json#/$defs/label``, relative to
the project root like every path of a workflow). Anything else — ``http(s)://``, a file
outside the project (``file:///etc/passwd``), a file that is missing or not JSON, another
scheme — is refused at validation with ``schema_ref_refused``; a ref to a place that
does not exist in the schema or a file (a pointer to nowhere) is ``invalid_schema``. Both
are located at the ``$ref``.

Refs to project files are bundled: each file goes into the schema's ``$defs`` and its refs
are rewritten as JSON pointers into the one document, so the schema an action carries
(stored in the run, hashed into the request fingerprint, sent to the provider) is
self-contained: the file's contents are part of what determines an answer, a changed file
is a new request, and nothing is read from disk or the network after validation. Such a
schema may not also use ``$id`` or anchors (whose meaning bundling would change).

Resolution uses ``referencing``, the library jsonschema resolves with, over a registry
whose ``retrieve`` serves only those project files: nothing ever goes over HTTP. The
engine's validator uses :func:`offline_registry`, which retrieves nothing at all.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012, specification_with

from agac.config.source import Findings

__all__ = [
    "MAX_REF_FILES",
    "MAX_REF_FILE_BYTES",
    "bundle_schema",
    "offline_registry",
    "unresolved_refs",
]

#: A referenced file larger than this is refused (a schema, not a data set).
MAX_REF_FILE_BYTES = 1024 * 1024
#: At most this many distinct files per schema.
MAX_REF_FILES = 100

Path_ = tuple[Any, ...]
_REF_KEYS = ("$ref", "$dynamicRef")
_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


class _Refused(Exception):
    """A ref to something that is neither the schema nor a file under the project."""


class _Broken(Exception):
    """A ref to a project file that cannot be used (missing, too big, not JSON)."""


def offline_registry() -> Registry[Any]:
    """A registry that retrieves nothing: a ref outside the schema is unresolvable."""
    return Registry(retrieve=_refuse_everything)  # type: ignore[call-arg]


def _refuse_everything(uri: str) -> Resource[Any]:
    raise NoSuchResource(uri)


@dataclass
class _Ref:
    node: dict[str, Any]  # the (copied) schema object holding the $ref
    doc: str  # URI of the document it is in


@dataclass
class _Bundle:
    """The project files a schema's refs reach, read once each (``retrieve``)."""

    root: Path
    root_uri: str
    files: dict[str, Any] = field(default_factory=dict)  # file URI -> (copied) contents
    names: dict[str, str] = field(default_factory=dict)  # file URI -> project-relative path

    def retrieve(self, uri: str) -> Resource[Any]:
        if uri not in self.files:
            path = self._path_of(uri)
            if len(self.files) >= MAX_REF_FILES:
                raise _Broken(f"more than {MAX_REF_FILES} files are referenced")
            self.files[uri] = _read_json(path, self.names[uri])
        return _resource(self.files[uri])

    def _path_of(self, uri: str) -> Path:
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query:
            raise _Refused(f"{uri} is neither within the schema nor a file under the project")
        path = Path(unquote(parts.path))
        try:
            real = path.resolve()
            name = real.relative_to(self.root).as_posix()
        except (OSError, ValueError):
            raise _Refused(
                f"{unquote(parts.path)} is not under the project ({self.root})"
            ) from None
        self.names[uri] = name
        return real


def _read_json(path: Path, name: str) -> Any:
    """A regular file of at most MAX_REF_FILE_BYTES, parsed as JSON."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _Broken(f"{name} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise _Broken(f"{name} is not a regular file")
    if info.st_size > MAX_REF_FILE_BYTES:
        raise _Broken(f"{name} is larger than {MAX_REF_FILE_BYTES} bytes")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_REF_FILE_BYTES + 1)
        return json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise _Broken(f"{name} cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Broken(f"{name} is not JSON: {exc}") from None


def _resource(contents: Any) -> Resource[Any]:
    dialect = str(contents.get("$schema", "")) if isinstance(contents, dict) else ""
    return specification_with(dialect, default=DRAFT202012).create_resource(contents)


def bundle_schema(
    f: Findings, schema: dict[str, Any], path: Path_, root: Path
) -> dict[str, Any] | None:
    """``schema`` with every ``$ref`` checked and every project file bundled in; None
    (and a located problem per bad ref) when a ref is refused or does not resolve."""
    base = root.resolve()
    bundle = _Bundle(base, base.as_uri() + "/")
    contents = json.loads(json.dumps(schema))  # a copy that is plain JSON data
    resource = _resource(contents)
    registry: Registry[Any] = Registry(retrieve=bundle.retrieve)  # type: ignore[call-arg]
    registry = registry.with_resource(bundle.root_uri, resource).crawl()
    places = dict(_places(contents, path))
    refs: list[_Ref] = []
    uses_ids, ok = False, True
    queue: list[tuple[Resource[Any], str, str | None]] = [(resource, bundle.root_uri, None)]
    walked = {bundle.root_uri}
    while queue:
        doc, doc_uri, via = queue.pop(0)
        for node, resolver, has_id in _ref_nodes(doc, registry.resolver(doc_uri)):
            uses_ids = uses_ids or has_id
            for key in _REF_KEYS:
                ref = node.get(key) if node is not None else None
                if node is None or not isinstance(ref, str):
                    continue
                where = places.get(id(node), path) if via is None else path
                try:
                    resolver.lookup(ref)
                except Unresolvable as exc:
                    ok = False
                    _report(f, exc, ref, where + ((key,) if via is None else ()), via)
                    continue
                if key == "$ref":
                    refs.append(_Ref(node, doc_uri))
                target, _ = urldefrag(urljoin(doc_uri, ref))
                if target in bundle.files and target not in walked:
                    walked.add(target)
                    queue.append((_resource(bundle.files[target]), target, bundle.names[target]))
    if not ok:
        return None
    if not bundle.files:
        return schema
    if uses_ids:
        f.error(
            "schema_ref_refused",
            "a schema that refers to files under the project cannot "
            "also use $id, anchors or dynamic refs (bundling the files would change what "
            "they mean)",
            path,
            hint="write refs as JSON pointers: schemas/common.json#/$defs/label",
        )
        return None
    bundled = _bundled(contents, bundle, refs)
    try:
        validator_for(bundled).check_schema(bundled)
    except SchemaError as exc:
        at = "/".join(str(p) for p in exc.path) or "schema"
        f.error(
            "invalid_schema",
            "the schema with the files its $refs name is not a valid "
            f"JSON Schema at {at}: {exc.message}",
            path,
        )
        return None
    return bundled


def _bundled(contents: dict[str, Any], bundle: _Bundle, refs: list[_Ref]) -> dict[str, Any]:
    """Every ref rewritten as a pointer into the one document; the files under $defs."""
    defs = contents.setdefault("$defs", {})
    prefix = {bundle.root_uri: ""}
    for uri in bundle.files:
        key = _KEY_CHARS.sub("_", bundle.names[uri])
        while key in defs:
            key += "_"
        defs[key] = bundle.files[uri]
        prefix[uri] = f"/$defs/{key}"
    for ref in refs:
        text = ref.node["$ref"]
        target, fragment = (
            (ref.doc, text[1:]) if text.startswith("#") else urldefrag(urljoin(ref.doc, text))
        )
        ref.node["$ref"] = "#" + prefix[target] + fragment
    return contents


def _report(f: Findings, exc: Unresolvable, ref: str, where: Path_, via: str | None) -> None:
    cause: BaseException | None = exc.__cause__
    while cause is not None and not isinstance(cause, _Refused | _Broken):
        cause = cause.__cause__
    inside = f" (in {via})" if via else ""
    if isinstance(cause, _Refused):
        f.error(
            "schema_ref_refused",
            f"$ref {ref!r}{inside} is refused: {cause}; agac never fetches a schema",
            where,
            hint="copy what it names into the schema's $defs, "
            "or into a JSON file under the project",
        )
    elif isinstance(cause, _Broken):
        f.error(
            "schema_ref_refused",
            f"$ref {ref!r}{inside} names no JSON file agac can use: {cause}",
            where,
            hint="refer to a JSON file under the project",
        )
    else:
        f.error(
            "invalid_schema",
            f"$ref {ref!r}{inside} names nothing: {exc}",
            where,
            hint="a pointer is #/$defs/NAME (or FILE.json#/$defs/NAME) and must name a "
            "place that exists",
        )


def _ref_nodes(
    resource: Resource[Any], resolver: Any
) -> Iterator[tuple[dict[str, Any] | None, Any, bool]]:
    """(schema object holding a ref or None, its resolver, whether it sets an id or an
    anchor or holds a dynamic ref) for ``resource`` and every subschema in it, at the
    places its dialect says hold schemas (never inside ``enum``, ``const``, ``default``)."""
    resolver = resolver.in_subresource(resource)
    contents = resource.contents
    if isinstance(contents, dict):
        dynamic = any(k in contents for k in ("$dynamicRef", "$recursiveRef"))
        has_id = (
            resource.id() is not None or dynamic or next(iter(resource.anchors()), None) is not None
        )
        yield (contents if any(k in contents for k in _REF_KEYS) else None), resolver, has_id
    for sub in resource.subresources():
        yield from _ref_nodes(sub, resolver)


def _places(value: Any, path: Path_) -> Iterator[tuple[int, Path_]]:
    """id() of every object in ``value`` -> its path (to locate a ref in the file)."""
    if isinstance(value, dict):
        yield id(value), path
        for key, child in value.items():
            yield from _places(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _places(child, path + (index,))


def unresolved_refs(schema: Any) -> list[str]:
    """The refs of ``schema`` that do not resolve within it (retrieving nothing): a
    schema validation bundled has none. The engine checks a stored schema with it before
    anything is sent, so a run admitted by an older agac never resolves after a call."""
    resource = _resource(schema)
    registry = offline_registry().with_resource("", resource).crawl()
    bad = []
    for node, resolver, _ in _ref_nodes(resource, registry.resolver("")):
        for key in _REF_KEYS:
            ref = node.get(key) if node is not None else None
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    bad.append(ref)
    return bad
