"""The part of PostgREST's query language the stand-in serves, as pure
functions (no IO): `select=`, horizontal filters `col=op.value`, `order=`,
`limit=`, `offset=`. Produces SQL text with $n parameters over a known
column list, so no client string ever becomes an identifier unchecked."""
from __future__ import annotations

from dataclasses import dataclass, field


class QueryError(Exception):
    """A request PostgREST would refuse; carries its code, HTTP status and texts."""

    def __init__(self, status: int, code: str, message: str, details=None, hint=None):
        super().__init__(message)
        self.status, self.code, self.message, self.details, self.hint = status, code, message, details, hint


# PostgREST operators → SQL (the value is passed as text and cast to the column's type).
OPERATORS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
RESERVED = {"select", "order", "limit", "offset", "columns", "on_conflict"}


@dataclass
class Query:
    columns: list[str]
    where: list[str] = field(default_factory=list)
    params: list = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    limit: int | None = None
    offset: int | None = None


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse_select(value: str | None, table_columns: dict[str, str]) -> list[str]:
    if value is None or value.strip() in ("", "*"):
        return list(table_columns)
    cols = []
    for part in value.split(","):
        c = part.strip()
        if c == "*":
            cols.extend(table_columns)
            continue
        if c not in table_columns:
            raise QueryError(400, "42703", f"column {c} does not exist")
        cols.append(c)
    return cols


def add_filter(q: Query, column: str, expr: str, table_columns: dict[str, str], table: str) -> None:
    if column not in table_columns:
        raise QueryError(400, "42703", f"column {table}.{column} does not exist")
    negate = False
    if expr.startswith("not."):
        negate, expr = True, expr[4:]
    op, dot, value = expr.partition(".")
    if not dot:
        raise QueryError(400, "PGRST100", f'"failed to parse filter ({expr})" (line 1, column {len(expr)})',
                         "unexpected end of input expecting operator")
    col = quote_ident(column)
    ctype = table_columns[column]
    if op in OPERATORS:
        q.params.append(value)
        cond = f"{col} {OPERATORS[op]} (${len(q.params)}::text)::{ctype}"
    elif op == "is":
        lit = {"null": "null", "true": "true", "false": "false", "unknown": "unknown"}.get(value.lower())
        if lit is None:
            raise QueryError(400, "PGRST100", f'"failed to parse filter (is.{value})"')
        cond = f"{col} is {lit}"
    elif op == "in":
        if not (value.startswith("(") and value.endswith(")")):
            raise QueryError(400, "PGRST100", f'"failed to parse filter (in.{value})"')
        items = [v.strip().strip('"') for v in value[1:-1].split(",")] if value[1:-1] else []
        q.params.append(items)
        cond = f"{col} = any((${len(q.params)}::text[])::{ctype}[])"
    else:
        raise QueryError(400, "PGRST100", f'"failed to parse filter ({expr})"', f"unknown operator {op}")
    q.where.append(f"not ({cond})" if negate else cond)


def parse_order(value: str, table_columns: dict[str, str], table: str) -> list[str]:
    terms = []
    for part in value.split(","):
        bits = part.strip().split(".")
        col = bits[0]
        if col not in table_columns:
            raise QueryError(400, "42703", f"column {table}.{col} does not exist")
        sql = quote_ident(col)
        for b in bits[1:]:
            if b in ("asc", "desc"):
                sql += " " + b
            elif b in ("nullsfirst", "nullslast"):
                sql += " nulls " + b[5:]
            else:
                raise QueryError(400, "PGRST100", f'"failed to parse order ({value})"')
        terms.append(sql)
    return terms


def parse_nonneg(name: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise QueryError(400, "PGRST100", f'"failed to parse {name} ({value})"') from None
    if n < 0:
        raise QueryError(400, "PGRST100", f'"failed to parse {name} ({value})"')
    return n


def parse_query(items: list[tuple[str, str]], table_columns: dict[str, str],
                table: str = "signaling_messages") -> Query:
    """`items` are the decoded query parameters in order (repeated keys allowed)."""
    q = Query(columns=[])
    select = None
    for k, v in items:
        if k == "select":
            select = v
        elif k == "order":
            q.order = parse_order(v, table_columns, table)
        elif k == "limit":
            q.limit = parse_nonneg("limit", v)
        elif k == "offset":
            q.offset = parse_nonneg("offset", v)
        elif k in RESERVED or k == "apikey":
            continue
        else:
            add_filter(q, k, v, table_columns, table)
    q.columns = parse_select(select, table_columns)
    return q


def select_sql(table: str, q: Query) -> str:
    """One statement returning the result as a JSON array text, built by
    Postgres (timestamps print as PostgREST prints them)."""
    cols = ", ".join(quote_ident(c) for c in q.columns)
    sql = f"select {cols} from public.{quote_ident(table)}"
    if q.where:
        sql += " where " + " and ".join(q.where)
    if q.order:
        sql += " order by " + ", ".join(q.order)
    if q.limit is not None:
        sql += f" limit {q.limit}"
    if q.offset is not None:
        sql += f" offset {q.offset}"
    return f"select coalesce(json_agg(_r), '[]')::text, count(*) from ({sql}) _r"


def status_for_sqlstate(code: str, role: str) -> int:
    """HTTP status PostgREST gives a SQLSTATE (docs/contract.md, wire B)."""
    if code == "42501":
        return 401 if role == "anon" else 403
    if code == "P0001":
        return 400
    if code.startswith("P0"):
        return 500
    if code.startswith("54") or code.startswith("53") or code.startswith("57") or code.startswith("58") or code.startswith("XX"):
        return 500
    if code.startswith("PT") and code[2:].isdigit():
        return int(code[2:])
    if code in ("23505", "23503"):
        return 409
    if code == "42P01":
        return 404
    if code == "42883":
        return 404
    if code.startswith("08"):
        return 503
    if code.startswith("25"):
        return 500
    if code.startswith("40"):
        return 500
    return 400
