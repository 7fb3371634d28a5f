"""The grammar a tool call's arguments are generated under (GBNF text, no llama.cpp needed).

For a flat parameters schema (an object whose properties are strings, numbers, integers,
booleans, enums or arrays of those; anything else becomes a JSON value) the arguments are
written like ``json.dumps`` writes them: ``{"expression": "25*4"}``, keys in schema order
(required first), ``", "`` and ``": "`` between. The fixed start is given back as a prefix
to put in the prompt, up to the opening quote of the first required string value, so the
model goes on from ``{"expression": "`` in the same tokens as a rendered call, instead of
choosing how to tokenize the punctuation. On SmolLM2-135M this matters: under the plain
schema grammar the model picked merged tokens such as ``""`` and ``".`` after the colon (an
empty expression, or one starting with an invented ``.``) where, given the prefix, its
most likely next tokens are the digits of the question.

Other schemas (``$ref``, nested objects with properties, ``allOf``…) fall back to
llama-cpp-python's JSON-schema converter, with a grammar of its own and no prefix. Strings
never contain raw control characters (invalid JSON; the converter's grammar allows them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ArgumentsPlan", "arguments_plan"]

_COMMON = r"""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" hex hex hex hex)
hex ::= [0-9a-fA-F]
string ::= "\"" char* "\""
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
integer ::= "-"? ("0" | [1-9] [0-9]*)
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ( string ": " value ( ", " string ": " value )* )? "}"
array ::= "[" ( value ( ", " value )* )? "]"
"""

_PRIMITIVE = {"string", "number", "integer", "boolean", "null"}


class ArgumentsPlan:
    """How to generate one tool's arguments: ``prefix`` goes into the prompt, the model
    continues under ``grammar``; the arguments are ``prefix + generated text``."""

    def __init__(self, prefix: str, grammar: str, *, lstrip: bool = False) -> None:
        self.prefix = prefix
        self.grammar = grammar
        self.lstrip = lstrip
        """The generated text starts with a space to drop (the converter fallback)."""


class _Unsupported(Exception):
    pass


def _literal(text: str) -> str:
    return json.dumps(text)  # a GBNF string literal escapes like a JSON string


def _value_rule(schema: object, depth: int = 0) -> str:
    """A GBNF expression for a value of ``schema`` (primitives exactly, the rest loosely)."""
    if not isinstance(schema, Mapping) or depth > 3:
        return "value"
    if "$ref" in schema or "allOf" in schema:
        raise _Unsupported("$ref/allOf")
    if "const" in schema:
        return _literal(json.dumps(schema["const"], ensure_ascii=False))
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return (
            "("
            + " | ".join(_literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"])
            + ")"
        )
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return "(" + " | ".join(_value_rule(s, depth + 1) for s in schema[key]) + ")"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "(" + " | ".join(_value_rule({**schema, "type": k}, depth + 1) for k in kind) + ")"
    if kind in _PRIMITIVE:
        return str(kind)
    if kind == "array":
        item = _value_rule(schema.get("items"), depth + 1)
        return f'("[" ( {item} ( ", " {item} )* )? "]")'
    if kind == "object" and schema.get("properties"):
        raise _Unsupported("nested object with properties")
    return "value"


def _plain_string(schema: object) -> bool:
    return (
        isinstance(schema, Mapping)
        and schema.get("type") == "string"
        and not {"const", "enum", "anyOf", "oneOf", "$ref", "allOf"} & set(schema)
    )


def arguments_plan(parameters: Mapping[str, Any]) -> ArgumentsPlan:
    """The plan for a tool whose ``parameters`` are this JSON schema."""
    try:
        return _flat_plan(parameters)
    except _Unsupported:
        return _converter_plan(parameters)


def _flat_plan(parameters: Mapping[str, Any]) -> ArgumentsPlan:
    if parameters.get("type", "object") != "object":
        raise _Unsupported("not an object")
    if {"$ref", "$defs", "definitions", "allOf", "anyOf", "oneOf"} & set(parameters):
        raise _Unsupported("composite schema")
    props = parameters.get("properties") or {}
    if not isinstance(props, Mapping):
        raise _Unsupported("properties")
    wanted = parameters.get("required") or []
    required = [p for p in props if isinstance(wanted, list) and p in wanted]
    optional = [p for p in props if p not in required]
    rules = {name: _value_rule(props[name]) for name in props}

    def kv(name: str) -> str:
        return f"{_literal(json.dumps(name) + ': ')} {rules[name]}"

    if not required:
        if not optional:
            return ArgumentsPlan("{", 'root ::= "}"\n' + _COMMON)
        any_kv = "(" + " | ".join(kv(p) for p in optional) + ")"
        root = f'root ::= ( {any_kv} ( ", " {any_kv} )* )? "}}"'
        return ArgumentsPlan("{", root + "\n" + _COMMON)
    first, rest = required[0], required[1:]
    prefix = "{" + json.dumps(first) + ": "
    if _plain_string(props[first]):
        prefix += '"'
        head = 'char* "\\""'
    else:
        head = rules[first]
    parts = [head]
    parts += [f'", " {kv(p)}' for p in rest]
    parts += [f'( ", " {kv(p)} )?' for p in optional]
    root = "root ::= " + " ".join(parts) + ' "}"'
    return ArgumentsPlan(prefix, root + "\n" + _COMMON)


def _converter_plan(parameters: Mapping[str, Any]) -> ArgumentsPlan:
    from llama_cpp import llama_grammar

    try:
        body = llama_grammar.json_schema_to_gbnf(json.dumps(parameters))
    except Exception:  # a schema the converter cannot read: any JSON object
        body = llama_grammar.json_schema_to_gbnf(json.dumps({"type": "object"}))
    body = body.replace('char ::= [^"\\\\]', 'char ::= [^"\\\\\\x00-\\x1F]')
    body = re.sub(r"^root\s*::=", "arguments ::=", body, count=1, flags=re.MULTILINE)
    return ArgumentsPlan("", 'root ::= " " arguments\n' + body, lstrip=True)
