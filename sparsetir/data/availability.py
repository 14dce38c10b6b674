"""Which datasets a run can get, asked of every route before the run starts, and said in one table.

A *need* is a dataset that some experiments read: its name, its registry files and who uses it.
:func:`survey` probes every file's routes (embedded ``data/``, cache, mirror: each copy verified,
nothing deleted or downloaded; :func:`sparsetir.data.resolve.probe`) and, for the files that only a
download can bring, checks once per server whether it can be reached at all (a TCP connection, no
request; skipped when ``$SPARSETIR_DATA_NETWORK_CHECK`` is ``0``). Each row then says where the
dataset was found, or that it will be downloaded, or why it is unavailable (:data:`WHY`).

:func:`format_table` is the table the workflow prints before any job runs; :func:`write_survey`
keeps the rows in the results folder, and :func:`missing_at_end` reads them back (verified) at the
end of the run, with what the downloads brought, for the end-of-run screen.
"""

from __future__ import annotations

import json
import os
import textwrap
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .download import downloads_enabled, unreachable
from .resolve import probe

__all__ = ["NETWORK_CHECK_ENV", "SURVEY_FILE", "SURVEY_VERSION", "WHY", "Need", "Row", "format_groups", "format_table",
           "group_missing", "missing_at_end", "read_survey", "survey", "write_survey"]

#: The survey's file in a results folder (the workflow writes it as the run starts).
SURVEY_FILE = "data_availability.json"
#: ``0`` skips the network check (the tests set it: nothing in the suite reaches the network).
NETWORK_CHECK_ENV = "SPARSETIR_DATA_NETWORK_CHECK"
SURVEY_VERSION = 1
#: Why a dataset is unavailable, one short phrase per cause (the end-of-run screen groups by it).
WHY = {
    "disabled": "downloads are disabled",
    "no-url": "no download URL is recorded",
    "no-network": "no network",
    "refused": "every copy found failed its sha256 or size check",
    "blocked": "a download would overwrite a file that is not the cache's",
    "not-downloaded": "the download did not bring it",
}
NETWORK_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Need:
    """A dataset some experiments read: ``name``, its registry files and the users (experiment names)."""

    name: str
    files: tuple
    used_by: tuple[str, ...]


@dataclass
class Row:
    """One dataset's answer: ``status`` ``found`` (``routes``: where), ``download`` (to be fetched:
    ``urls``) or ``unavailable`` (``why``: a key of :data:`WHY`, ``detail``: the particulars)."""

    dataset: str
    used_by: list[str]
    status: str
    routes: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    why: str | None = None
    detail: str | None = None
    files: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        """The whole "why unavailable" text (empty when found or to be downloaded)."""
        if self.status != "unavailable":
            return ""
        return WHY.get(self.why, str(self.why)) + (f" ({self.detail})" if self.detail else "")


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def _network_answers(urls: Iterable[str], timeout: float = NETWORK_TIMEOUT_S) -> dict[str, str | None]:
    """Host -> why it cannot be reached (``None``: reachable), all hosts at once, within about ``timeout``.

    Name resolution has no timeout of its own, so each host is asked in a daemon thread and a host
    that has not answered by the deadline counts as unreachable.
    """
    by_host = {_host(url): url for url in urls}
    answers: dict[str, str | None] = {}
    lock = threading.Lock()

    def ask(host: str, url: str) -> None:
        answer = unreachable(url, timeout=timeout)
        with lock:
            answers[host] = answer

    threads = [threading.Thread(target=ask, args=item, daemon=True) for item in by_host.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 1.0)
    with lock:
        return {host: answers.get(host, f"{host} did not answer within {timeout + 1.0:.0f} s") for host in by_host}


def _network_check_on() -> bool:
    return os.environ.get(NETWORK_CHECK_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def survey(needs: Sequence[Need], *, allow_download: bool | None = None, check_network: bool | None = None) -> list[Row]:
    """Probe every need's files (see the module docstring); one :class:`Row` per need, in order."""
    if allow_download is None:
        allow_download = downloads_enabled()
    if check_network is None:
        check_network = _network_check_on()
    rows, pending = [], {}
    for need in needs:
        probes = [probe(file, allow_download=allow_download) for file in need.files]
        row = Row(need.name, list(need.used_by), "found", files=[file.relpath for file in need.files])
        row.routes = sorted({answer.route for answer in probes if answer.route})
        missing = [answer for answer in probes if answer.path is None]
        refused = [text for answer in missing for text in answer.refused]
        blocked = [answer.no_download for answer in missing if answer.no_download]
        for answer in missing or probes:
            said = list(answer.tried)
            if answer.path is None:
                said.append("download: " + ("to do" if answer.download else
                                            "off" if answer.no_download.startswith("downloads are disabled") else
                                            "no URL" if answer.no_download.startswith("no download URL") else "blocked"))
            row.tried.append(("; ".join(said)) if len(probes) == 1 else f"{answer.relpath}: {'; '.join(said)}")
        if missing and blocked:
            row.status = "unavailable"
            text = blocked[0]
            row.why = ("disabled" if text.startswith("downloads are disabled") else
                       "no-url" if text.startswith("no download URL") else "blocked")
            if refused:
                row.why, row.detail = "refused", "; ".join(refused)[:400]
        elif missing:
            row.status = "download"
            row.urls = [answer.download for answer in missing]
            pending[id(row)] = row
        rows.append(row)
    if pending and check_network:
        answers = _network_answers(url for row in pending.values() for url in row.urls)
        for row in pending.values():
            down = sorted({answers[_host(url)] for url in row.urls if answers[_host(url)]})
            if down:
                row.status, row.why, row.detail = "unavailable", "no-network", "; ".join(down)[:400]
                row.tried = [text.replace("download: to do", "download: no network") for text in row.tried]
    return rows


def _route_counts(rows: Sequence[Row]) -> str:
    counts: dict[str, list[str]] = {}
    for row in rows:
        if row.status == "found":
            counts.setdefault("+".join(row.routes) or "?", []).append(row.dataset)
    return "; ".join(f"{route} {len(names)} ({', '.join(names)})" for route, names in counts.items())


def format_table(rows: Sequence[Row], *, width: int = 100) -> str:
    """The pre-flight text: one line of counts and where each dataset was found, then one table
    (dataset, used by, routes tried, why unavailable) of every dataset that is not found locally."""
    found = [row for row in rows if row.status == "found"]
    fetch = [row for row in rows if row.status == "download"]
    missing = [row for row in rows if row.status == "unavailable"]
    head = (f"Data for this run (routes: embedded data/ -> cache -> mirror -> download): {len(rows)} datasets, "
            f"{len(found)} found, {len(fetch)} to download, {len(missing)} unavailable")
    lines = [head]
    if found:
        lines += textwrap.wrap(f"found: {_route_counts(found)}", width=110, initial_indent="  ",
                               subsequent_indent="    ", break_on_hyphens=False)
    table = [(row.dataset, ", ".join(row.used_by), " | ".join(row.tried),
              "(to be downloaded from " + ", ".join(sorted({_host(url) for url in row.urls})) + ")"
              if row.status == "download" else row.reason) for row in fetch + missing]
    if table:
        header = ("dataset", "used by", "routes tried", "why unavailable")
        widths = [min(max(len(cells[i]) for cells in [header, *table]), width) for i in range(3)]
        for cells in [header, *table]:
            lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells[:3])) + "  " + cells[3])
    if missing:
        lines.append(f"  {len(missing)} unavailable: their rows will say 'unavailable' and the run goes on "
                     "(README, section Data: a mirror or downloads provide them)")
    return "\n".join(lines)


def write_survey(path: str | Path, rows: Sequence[Row], *, data: dict | None = None) -> Path:
    """Keep the rows (and the config's ``data`` section) as JSON at ``path``, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"version": SURVEY_VERSION, "data": data or {}, "rows": [asdict(row) for row in rows]}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return path


_ROW_FIELDS = {"dataset": str, "used_by": list, "status": str, "routes": list, "tried": list, "files": list,
               "urls": list}


def read_survey(path: str | Path) -> tuple[dict, list[Row]]:
    """The ``data`` section and rows :func:`write_survey` kept; ``ValueError`` naming what is wrong."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: unreadable data survey ({error})") from None
    if not isinstance(document, dict) or document.get("version") != SURVEY_VERSION or not isinstance(
            document.get("rows"), list) or not isinstance(document.get("data", {}), dict):
        raise ValueError(f"{path}: not a data survey of version {SURVEY_VERSION}")
    rows = []
    for number, item in enumerate(document["rows"]):
        if not isinstance(item, dict) or any(not isinstance(item.get(key), kind) for key, kind in _ROW_FIELDS.items()):
            raise ValueError(f"{path}: row {number} is malformed")
        if item["status"] not in ("found", "download", "unavailable") or not all(
                isinstance(value, str) for key in ("used_by", "routes", "tried", "files", "urls") for value in item[key]):
            raise ValueError(f"{path}: row {number} is malformed")
        for key in ("why", "detail"):
            if item.get(key) is not None and not isinstance(item[key], str):
                raise ValueError(f"{path}: row {number}: {key} must be a string or null")
        rows.append(Row(**{key: item.get(key) for key in (*_ROW_FIELDS, "why", "detail")}))
    return document.get("data", {}), rows


def missing_at_end(path: str | Path, *, workdir: str | Path = ".") -> list[Row]:
    """The datasets the run could not get: the survey's unavailable rows, and those that were to be
    downloaded but whose files are not in the cache (``data.cache``, relative to ``workdir``) now."""
    data, rows = read_survey(path)
    cache = Path(workdir) / str(data.get("cache") or "data/cache")
    missing = []
    for row in rows:
        if row.status == "download":
            absent = [relpath for relpath in row.files if not (cache / relpath).is_file()]
            if not absent:
                continue
            row.status, row.why = "unavailable", "not-downloaded"
            row.detail = f"{', '.join(absent)} not in {cache}; see the run's log"
        if row.status == "unavailable":
            missing.append(row)
    return missing


def group_missing(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Unavailable rows grouped by :attr:`Row.why`, in :data:`WHY` order."""
    groups: dict[str, list[Row]] = {}
    for row in sorted(rows, key=lambda row: list(WHY).index(row.why) if row.why in WHY else len(WHY)):
        groups.setdefault(str(row.why), []).append(row)
    return groups


def format_groups(rows: Sequence[Row], *, indent: str = "  ") -> list[str]:
    """Lines naming every unavailable dataset (with its users), one group per cause."""
    lines = []
    for why, members in group_missing(rows).items():
        details = sorted({row.detail for row in members if row.detail})
        cause = WHY.get(why, why) + (f" ({details[0]}{'; ...' if len(details) > 1 else ''})" if details else "")
        names = ", ".join(f"{row.dataset} [{', '.join(row.used_by)}]" for row in members)
        lines.append(f"{indent}{len(members):>3} {cause}: {names}")
    return lines
