"""Text functions: ||'s text operands, CONCAT, SUBSTRING, LEFT / RIGHT, UPPER / LOWER, INITCAP,
LENGTH, TRIM, REPLACE, POSITION, LPAD / RPAD, REVERSE, STARTS_WITH, REPEAT, SPLIT_PART, MD5,
octet_length, TRANSLATE, ASCII, CHR, REGEXP_REPLACE.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported
from planner.expr.arrow_values import any_true, Value
from planner.expr.located import error_at, node_position
from planner.expr.sqltypes import kind_of, null_of, pg_name
from planner.expr.core import ANONYMOUS, EvalContext, eval_node, handles
from planner.expr.coerce import const_arg, int_arg, string_arg, as_text


@handles(exp.Concat)
def _concat(node: exp.Concat, ctx: EvalContext) -> Value:
    parts = [as_text(eval_node(e, ctx), e, output=True) for e in node.expressions]
    return pc.binary_join_element_wise(*parts, "", null_handling="replace",
                                       null_replacement="")


@handles(exp.ConcatWs)
def _concat_ws(node: exp.ConcatWs, ctx: EvalContext) -> Value:
    sep, *rest = [as_text(eval_node(e, ctx), e, output=True) for e in node.expressions]
    if not rest:
        return sep
    joined = pc.binary_join_element_wise(*rest, sep, null_handling="skip")
    return pc.if_else(pc.is_null(sep), null_of(pa.string()), joined)


def _slice(s: Value, start: int, stop: int | None) -> Value:
    if kind_of(s.type) == "binary":
        return pc.binary_slice(s, start, stop)
    return pc.utf8_slice_codeunits(s, start, stop)


@handles(exp.Substring)
def _substring(node: exp.Substring, ctx: EvalContext) -> Value:
    s = eval_node(node.this, ctx)
    if kind_of(s.type) not in ("string", "binary", "null"):
        s = string_arg(s, "substring", node.this)
    if node.args.get("start") is None:      # substr('abc'): no such function
        raise error_at(f"function substring({pg_name(s.type)}) does not exist", "42883", node)
    start = int_arg(eval_node(node.args["start"], ctx), "substring start", node)
    length_node = node.args.get("length")
    length = (int_arg(eval_node(length_node, ctx), "substring length", node)
              if length_node is not None else None)
    out_type = pa.string() if kind_of(s.type) == "null" else s.type
    if start is None or (length_node is not None and length is None) or \
            kind_of(s.type) == "null":
        return null_of(out_type)
    if length is not None and length < 0:
        raise error_at("negative substring length not allowed", "22011", node)
    # 1-based [start, start + length) clipped to the string: start < 1 eats into length.
    begin = max(start - 1, 0)
    stop = None if length is None else max(start - 1 + length, begin)
    return _slice(s, begin, stop)


@handles(exp.Left, exp.Right)
def _left_right(node: exp.Binary, ctx: EvalContext) -> Value:
    fn = "left" if isinstance(node, exp.Left) else "right"
    s = string_arg(eval_node(node.this, ctx), fn, node.this)
    n = int_arg(eval_node(node.expression, ctx), f"{fn} length", node)
    if n is None or kind_of(s.type) == "null":
        return null_of(pa.string())
    if isinstance(node, exp.Left):  # n < 0: all but the last |n| characters
        return _slice(s, 0, n)
    # n > 0: the last n characters (start -n); n < 0: all but the first |n| (start |n|)
    return _slice(s, -n, None) if n != 0 else _slice(s, 0, 0)


@handles(exp.Upper, exp.Lower)
def _upper_lower(node: exp.Func, ctx: EvalContext) -> Value:
    fn = "upper" if isinstance(node, exp.Upper) else "lower"
    s = string_arg(eval_node(node.this, ctx), fn, node.this)
    if kind_of(s.type) == "null":
        return s.cast(pa.string())
    return (pc.utf8_upper if isinstance(node, exp.Upper) else pc.utf8_lower)(s)


@handles(exp.Initcap)
def _initcap(node: exp.Initcap, ctx: EvalContext) -> Value:
    """PostgreSQL's initcap: a letter is upper case after a character that is not a letter
    or digit, lower case otherwise. Arrow's utf8_title starts a word after a digit too
    ('2nd' -> '2Nd'); those strings go through Python, once per distinct value."""
    s = string_arg(eval_node(node.this, ctx), "initcap", node.this)
    if kind_of(s.type) == "null":
        return s
    titled = pc.utf8_title(pc.utf8_lower(s))
    after_digit = pc.match_substring_regex(s, r"[0-9]\pL")
    if not any_true(after_digit):
        return titled
    return _per_distinct(s, _initcap_text, s.type)


def _initcap_text(text: str) -> str:
    out, prev_alnum = [], False
    for ch in text:
        out.append(ch.lower() if prev_alnum else ch.upper())
        prev_alnum = ch.isalnum()
    return "".join(out)


@handles(exp.Length)
def _length(node: exp.Length, ctx: EvalContext) -> Value:
    s = eval_node(node.this, ctx)
    k = kind_of(s.type)
    if k == "binary":
        return pc.binary_length(s)
    s = string_arg(s, "length", node.this)
    return pc.utf8_length(s) if k != "null" else null_of(pa.int32())


@handles(exp.Trim)
def _trim(node: exp.Trim, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "trim", node.this)
    chars_node = node.args.get("expression")
    chars = " "
    if chars_node is not None:
        chars = const_arg(eval_node(chars_node, ctx), "trim character set", chars_node)
        if chars is None:
            return null_of(pa.string())
    if kind_of(s.type) == "null":
        return s.cast(pa.string())
    position = (node.args.get("position") or "BOTH").upper()
    fn = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(position, pc.utf8_trim)
    return fn(s, characters=chars)


@handles(exp.Replace)
def _replace(node: exp.Replace, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "replace", node.this)
    old = const_arg(eval_node(node.expression, ctx), "replace pattern", node.expression)
    new_node = node.args["replacement"]
    new = const_arg(eval_node(new_node, ctx), "replacement", new_node)
    if old is None or new is None or kind_of(s.type) == "null":
        return null_of(pa.string())
    if old == "":
        return s
    return pc.replace_substring(s, pattern=old, replacement=new)


@handles(exp.StrPosition)
def _strpos(node: exp.StrPosition, ctx: EvalContext) -> Value:
    if node.args.get("position") or node.args.get("occurrence"):
        raise FeatureNotSupported("POSITION with a start or occurrence is not supported",
                                  position=node_position(node))
    s = string_arg(eval_node(node.this, ctx), "strpos", node.this)
    sub_node = node.args["substr"]
    sub = const_arg(eval_node(sub_node, ctx), "search string", sub_node)
    if sub is None or kind_of(s.type) == "null":
        return null_of(pa.int32())
    if sub == "":
        return pc.if_else(pc.is_valid(s), pa.scalar(1, pa.int32()), null_of(pa.int32()))
    ascii_only = (pc.string_is_ascii(s).as_py() if isinstance(s, pa.Scalar)
                  else pc.all(pc.string_is_ascii(s)).as_py() is not False)
    if ascii_only:  # byte offsets are character offsets
        return pc.add(pc.find_substring(s, pattern=sub), 1).cast(pa.int32())
    parts = pc.split_pattern(s, pattern=sub, max_splits=1)
    found = pc.equal(pc.list_value_length(parts), 2)
    before = pc.utf8_length(pc.list_element(parts, 0))
    return pc.if_else(found, pc.add(before, pa.scalar(1, pa.int32())), pa.scalar(0, pa.int32()))


@handles(exp.Pad)
def _pad(node: exp.Pad, ctx: EvalContext) -> Value:
    left = bool(node.args.get("is_left"))
    fn = "lpad" if left else "rpad"
    s = string_arg(eval_node(node.this, ctx), fn, node.this)
    width = int_arg(eval_node(node.expression, ctx), f"{fn} length", node)
    fill_node = node.args.get("fill_pattern")
    fill = " " if fill_node is None else const_arg(eval_node(fill_node, ctx), "pad string",
                                                    fill_node)
    if width is None or fill is None or kind_of(s.type) == "null":
        return null_of(pa.string())
    width = max(width, 0)
    if len(fill) > 1:
        raise FeatureNotSupported("a multi-character pad string is not supported",
                                  position=node_position(fill_node))
    if fill:
        s = (pc.utf8_lpad if left else pc.utf8_rpad)(s, width=width, padding=fill)
    return _slice(s, 0, width)  # PostgreSQL truncates strings longer than the width


@handles(exp.Reverse)
def _reverse(node: exp.Reverse, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "reverse", node.this)
    return pc.utf8_reverse(s) if kind_of(s.type) != "null" else s.cast(pa.string())


@handles(exp.StartsWith)
def _starts_with(node: exp.StartsWith, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "starts_with", node.this)
    prefix = const_arg(eval_node(node.expression, ctx), "prefix", node.expression)
    if prefix is None or kind_of(s.type) == "null":
        return null_of(pa.bool_())
    return pc.starts_with(s, pattern=prefix)


@handles(exp.Repeat)
def _repeat(node: exp.Repeat, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "repeat", node.this)
    n = eval_node(node.args["times"], ctx)
    if kind_of(n.type) != "int":
        raise error_at(f"function repeat(text, {pg_name(n.type)}) does not exist", "42883", node)
    if kind_of(s.type) == "null":
        return s.cast(pa.string())
    return pc.binary_repeat(s, pc.max_element_wise(n.cast(pa.int64()), 0))


ANONYMOUS["octet_length"] = lambda node, ctx: pc.binary_length(
    string_arg(eval_node(node.expressions[0], ctx), "octet_length", node))


@handles(exp.SplitPart)
def _split_part(node: exp.SplitPart, ctx: EvalContext) -> Value:
    """split_part(text, delimiter, n): the n-th field (1-based; negative counts from the
    end, PostgreSQL 14); '' past the last field; n = 0 is 22023. The delimiter and n must
    be constants."""
    s = string_arg(eval_node(node.this, ctx), "split_part", node.this)
    dnode, nnode = node.args.get("delimiter"), node.args.get("part_index")
    if dnode is None or nnode is None:
        raise error_at("function split_part(text) does not exist", "42883", node)
    delim = const_arg(eval_node(dnode, ctx), "delimiter", dnode)
    n = int_arg(eval_node(nnode, ctx), "field position", nnode)
    if delim is None or n is None or kind_of(s.type) == "null":
        return null_of(pa.string())
    if n == 0:
        raise error_at("field position must not be zero", "22023", nnode)
    if delim == "":     # the whole string is the one field
        whole = pc.if_else(pc.is_valid(s), s, null_of(pa.string()))
        return whole if n in (1, -1) else pc.if_else(pc.is_valid(s), pa.scalar(""),
                                                      null_of(pa.string()))
    parts = pc.split_pattern(s, pattern=delim)
    count = pc.list_value_length(parts)
    index = pc.subtract(n, 1) if n > 0 else pc.add(count, n)
    inside = pc.and_(pc.greater_equal(index, 0), pc.less(index, count))
    # clamp so list_element never reads out of bounds; outside rows become ''
    safe = pc.if_else(inside, index, 0)
    field = pc.list_element(parts, safe) if isinstance(parts, pa.Scalar) else \
        _element_at(parts, safe)
    return pc.if_else(inside, field, pa.scalar(""))


def _element_at(lists, index) -> pa.Array:
    """lists[i][index[i]], NULL where the list is NULL or the index outside it (or NULL),
    vectorised through the flattened values."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    index = index.combine_chunks() if isinstance(index, pa.ChunkedArray) else index
    index = index.cast(pa.int64())
    offsets = lists.offsets.slice(0, len(lists)).cast(pa.int64())
    ok = pc.and_(pc.is_valid(lists), pc.and_(
        pc.greater_equal(index, 0), pc.less(index, pc.list_value_length(lists))))
    pos = pc.if_else(pc.fill_null(ok, False), pc.add(offsets, index),
                     pa.scalar(None, pa.int64()))
    return pc.take(lists.values, pos)


@handles(exp.MD5)
def _md5(node: exp.MD5, ctx: EvalContext) -> Value:
    """md5(text): the hex digest of its UTF-8 bytes. Arrow has no MD5 kernel: one hashlib call
    per distinct value (`_per_distinct`; md5 is not a bulk-path function)."""
    s = string_arg(eval_node(node.this, ctx), "md5", node.this)
    if kind_of(s.type) == "null":
        return null_of(pa.string())
    return _per_distinct(s, lambda v: hashlib.md5(v.encode()).hexdigest(), pa.string())


def _per_distinct(v: Value, fn, out_type: pa.DataType) -> Value:
    """`fn` of each value of `v`, NULL for NULL: a Python call per distinct value, for the
    functions Arrow has no kernel for (translate, ascii, chr, initcap's digit rule)."""
    if isinstance(v, pa.Scalar):
        return pa.scalar(None if not v.is_valid else fn(v.as_py()), out_type)
    codes = pc.dictionary_encode(v)
    if isinstance(codes, pa.ChunkedArray):
        codes = codes.combine_chunks()
    values = pa.array([fn(x) for x in codes.dictionary.to_pylist()], out_type)
    return pc.take(values, codes.indices)


@handles(exp.Translate)
def _translate(node: exp.Translate, ctx: EvalContext) -> Value:
    """translate(text, from, to): each character of `from` becomes the one at its place in
    `to`, or is removed past the end of `to` (the first occurrence in `from` counts).
    `from` and `to` must be constants."""
    s = string_arg(eval_node(node.this, ctx), "translate", node.this)
    src = const_arg(string_arg(eval_node(node.args["from_"], ctx), "translate", node),
                     "translate argument", node)
    dst = const_arg(string_arg(eval_node(node.args["to"], ctx), "translate", node),
                     "translate argument", node)
    if src is None or dst is None or kind_of(s.type) == "null":
        return null_of(pa.string())
    table: dict[int, int | None] = {}
    for i, ch in enumerate(src):
        table.setdefault(ord(ch), ord(dst[i]) if i < len(dst) else None)
    return _per_distinct(s, lambda x: x.translate(table), pa.string())


@handles(exp.Ascii)
def _ascii(node: exp.Ascii, ctx: EvalContext) -> Value:
    """ascii(text): the code point of the first character; 0 for ''."""
    s = string_arg(eval_node(node.this, ctx), "ascii", node.this)
    if kind_of(s.type) == "null":
        return null_of(pa.int32())
    return _per_distinct(s, lambda x: ord(x[0]) if x else 0, pa.int32())


@handles(exp.Chr)
def _chr(node: exp.Chr, ctx: EvalContext) -> Value:
    """chr(integer): the character with that code point; 0 is 54000 (no NUL in text),
    a negative one 22023, one past Unicode 54000."""
    if len(node.expressions) != 1:
        raise error_at("function chr does not exist", "42883", node)
    n = eval_node(node.expressions[0], ctx)
    if kind_of(n.type) not in ("int", "null"):
        raise error_at(f"function chr({pg_name(n.type)}) does not exist", "42883", node)
    if kind_of(n.type) == "null":
        return null_of(pa.string())

    def char(code: int) -> str:
        if code == 0:
            raise error_at("null character not permitted", "54000", node)
        if code < 0:
            raise error_at("character number must be positive", "22023", node)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise error_at(f"requested character too large for encoding: {code}", "54000", node)
        return chr(code)
    return _per_distinct(n, char, pa.string())


@handles(exp.RegexpReplace)
def _regexp_replace(node: exp.RegexpReplace, ctx: EvalContext) -> Value:
    """regexp_replace(text, pattern, replacement [, flags]): the first match replaced, every
    match with flag g; flag i ignores case. Pattern, replacement and flags must be constants;
    the pattern is RE2's syntax (Arrow's kernel), which PostgreSQL's everyday patterns share;
    \\1..\\9 and \\& in the replacement refer to groups and the whole match."""
    s = string_arg(eval_node(node.this, ctx), "regexp_replace", node.this)
    for extra in ("position", "occurrence"):        # regexp_replace(s, p, r, start [, N])
        if node.args.get(extra) is not None:
            raise FeatureNotSupported("regexp_replace with a start position or match number "
                                      "is not supported", position=node_position(node))
    args = [node.args.get(k) for k in ("expression", "replacement", "modifiers")]
    pattern, replacement, flags = (
        None if a is None else const_arg(string_arg(eval_node(a, ctx), "regexp_replace", a),
                                          "regexp_replace argument", a)
        for a in args)
    if node.args.get("replacement") is None:
        raise error_at("function regexp_replace(text, text) does not exist", "42883", node)
    if pattern is None or replacement is None or kind_of(s.type) == "null" or (
            args[2] is not None and flags is None):
        return null_of(pa.string())
    flags = flags or ""
    bad = set(flags) - set("gi")
    if bad:
        raise error_at(f'invalid regular expression option: "{sorted(bad)[0]}"', "22023", node)
    # (?s): `.` matches a newline in PostgreSQL's regular expressions, not in RE2's default
    pattern = ("(?is)" if "i" in flags else "(?s)") + pattern
    replacement = replacement.replace("\\&", "\\0")
    try:
        return pc.replace_substring_regex(s, pattern, replacement,
                                          max_replacements=None if "g" in flags else 1)
    except pa.ArrowInvalid as e:
        raise error_at(f"invalid regular expression: {str(e).split(': ', 1)[-1]}", "2201B",
                   node) from None
