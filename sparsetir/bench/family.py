"""Experiment families: one declaration per family, one engine for all of them.

The harness's counterpart of ``ops.OpSpec``, in the shape of PyG's ``MessagePassing``: the base
class :class:`Family` owns the work every family shares, and a family overrides the hooks that make
it itself.

The base owns (one engine)
    :meth:`Family.contenders`   the configured sparsetir contenders, then the declared baselines
                                (``baselines.variants(<family>)``), each with its availability;
    :meth:`Family.check`        each contender built once (its set-up timed) and its result checked
                                against the float64 reference *before* anything is timed: a wrong,
                                failing or unavailable contender keeps no ``run`` and says why;
    :meth:`Family.time`         the correct ones timed together (``sparsetir.timing.time_interleaved``:
                                round by round, the cache flushed before every call), and each one's
                                speedup over the fastest reference (:meth:`Family.reference_names`);
    :meth:`Family.record`       one validated record (``bench.records``) per contender;
    :meth:`Family.format_records` the command line's table (``python -m sparsetir.bench <family>``).

A family declares (hooks)
    ``name``, ``op``, ``title``     the experiment, the records' op, the report's title;
    ``baseline_key``                its key in the baselines' ``VARIANTS`` (default: ``name``);
    :meth:`sparsetir_factory`       how a sparsetir contender is built on the family's inputs;
    :meth:`reference` / :meth:`mismatch`  the float64 reference of some inputs and how a result is
                                    compared with it;
    :meth:`reference_names`         the contenders a speedup is measured against;
    :meth:`record_fields`           the family's own fields of a record;
    :meth:`add_arguments` / :meth:`main`  its command-line options and cases.

Families register themselves: every module of :mod:`sparsetir.bench.families` is imported by
``sparsetir.bench.families.families()`` and calls :func:`register` once, so the workflow, the CLI
and the schema read one table instead of naming families.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..reference import Case, host_array, result_mismatch
from .case_runner import status_of
from .engine import SPARSETIR, Row
from .records import make_record

__all__ = ["SPARSETIR", "Contender", "Family", "format_option", "register", "registered"]

_REGISTRY: dict[str, Family] = {}


def format_option(value) -> str | None:
    """A format as configs and command lines spell it: null/default/none mean the family's heuristic (None)."""
    return None if value is None or str(value).strip().lower() in ("", "default", "none", "null") else str(value)


@dataclass
class Contender:
    """A named way to run a family's case: ``factory(inputs) -> run`` (None when unavailable, with ``reason``).

    ``forms`` holds a factory per other input form of the family (e.g. a whole network beside its layers); ``probe`` says
    how a fresh process rebuilds it (``{"format": ...}`` or ``{"baseline": name}``; None: it cannot);
    ``kind`` is ``"sparsetir"`` or ``"baseline"``; ``variant`` what was built (set by the check)."""

    name: str
    factory: Callable | None
    kind: str = "baseline"
    reason: str | None = None
    probe: dict | None = None
    variant: str | None = None
    forms: dict = field(default_factory=dict)
    error: str | None = None  # set: the contender cannot even be looked up; its row says this

    def factory_for(self, form: str | None = None) -> Callable | None:
        return self.factory if form is None else self.forms.get(form)


class Family:
    """One experiment family (see the module docstring): subclass it, set the names, override the hooks."""

    name: str = ""
    op: str = ""
    title: str = ""
    #: the paper's experiment in one line (a pending target's tables say it)
    description: str = ""
    baseline_key: str | None = None
    #: other input forms -> the baselines' key of their variants (e.g. {"network": "<family>-network"})
    form_keys: Mapping[str, str] = {}
    default_tune_budget_s: float | None = None
    #: what a build failure's reason starts with (the status follows from it: ``case_runner.status_of``)
    build_failure = "failed to build"
    #: a baseline's set-up seconds (no timings of its own) are its conversion time in its record
    setup_is_conversion = True

    #: a baseline's record names its variant (its name); else the variant its run reports
    baseline_variant_is_name = False
    #: library warnings are silenced while contenders build and run (e.g. torch's beta notices)
    quiet = False

    # ------------------------------------------------------------ hooks

    def build_error(self, error: Exception) -> str:
        """The row's reason when a contender fails to build (its status follows: ``case_runner.status_of``)."""
        return f"{self.build_failure}: {type(error).__name__}: {error}"

    def sparsetir_factory(self, inputs, *, format=None, tune_budget_s=None, form=None):
        """``run()`` of sparsetir's kernel(s) for ``inputs`` (compiled now), with ``run.timings``."""
        raise NotImplementedError(f"family {self.name!r} declares no sparsetir factory")

    def reference(self, inputs) -> Case:
        raise NotImplementedError(f"family {self.name!r} declares no reference")

    def mismatch(self, got, case: Case, run) -> tuple[str | None, dict]:
        """``(None, {})`` when ``got`` matches the reference, else ``("wrong result: ...", fields)``."""
        return result_mismatch(got, case), {}

    def reference_names(self, rows: Sequence[Row], contenders: Mapping[str, Contender]) -> Sequence[str]:
        """The contenders a speedup is over (default: the declared library references of the family)."""
        import baselines  # noqa: PLC0415 - the baselines load after the thread settings

        return baselines.library_references(self.baseline_key or self.name)

    def record_fields(self, row: Row, contender: Contender, **case) -> dict:
        """The family's own fields of one contender's record."""
        return {}

    def contender_name(self, fmt: str | None) -> str:
        """``sparsetir`` (None: the heuristic), ``sparsetir-auto`` (``"auto"``), else ``sparsetir[<format>]``."""
        if fmt is None:
            return SPARSETIR
        return f"{SPARSETIR}-auto" if fmt == "auto" else f"{SPARSETIR}[{fmt}]"

    # ------------------------------------------------------------ contenders

    def sparsetir_contender(self, fmt=None, *, tune_budget_s=None, name: str | None = None) -> Contender:
        """The sparsetir contender in format ``fmt`` (None: the heuristic; ``"auto"``: tuned)."""
        fmt = fmt if isinstance(fmt, Mapping) else format_option(fmt)
        forms = {form: (lambda inputs, form=form: self.sparsetir_factory(inputs, format=fmt,
                                                                           tune_budget_s=tune_budget_s, form=form))
                 for form in self.form_keys}
        return Contender(name or self.contender_name(fmt),
                         lambda inputs: self.sparsetir_factory(inputs, format=fmt, tune_budget_s=tune_budget_s),
                         kind=SPARSETIR, probe={"format": fmt, "tune_budget_s": tune_budget_s}, forms=forms)

    def baseline_arguments(self, inputs, form: str | None = None) -> tuple:
        """The positional arguments a baseline variant's factory takes for ``inputs`` (default: the inputs)."""
        return (inputs,)

    def baseline_contenders(self, names: Sequence[str] | None = None, *, device: str = "cpu",
                            options: Mapping[str, Mapping] | None = None, key: str | None = None) -> list[Contender]:
        """The declared baselines of ``key`` (default: the family's; all of them, or ``names`` in that order),
        each with its availability on ``device``, its factory keyword arguments (``options``: variant ->
        keywords) and its factory for every other input form it declares. A name no library declares is
        a contender that fails, saying so (its row; the others go on)."""
        import baselines  # noqa: PLC0415 - the baselines load after the thread settings

        key = key or self.baseline_key or self.name
        other = {} if key != (self.baseline_key or self.name) else {
            form: baselines.variants(other_key) for form, other_key in self.form_keys.items()}
        chosen: dict = {}
        for name in (baselines.variants(key) if names is None else names):
            try:
                chosen.update(baselines.variants(key, [name]))
            except ValueError as error:
                chosen[name] = error
        contenders = []
        for name, entry in chosen.items():
            if isinstance(entry, Exception):
                contenders.append(Contender(name, None, error=f"failed: {type(entry).__name__}: {entry}"))
                continue
            ok, reason = entry.available(device)
            keywords = dict((options or {}).get(name) or {})

            def build(inputs, entry=entry, form=None, keywords=keywords):
                return entry.build(*self.baseline_arguments(inputs, form), device=device, **keywords)

            forms = {form: functools.partial(build, entry=declared[name], form=form, keywords={})
                     for form, declared in other.items() if ok and name in declared}
            contenders.append(Contender(name, build if ok else None, reason=None if ok else reason,
                                        probe={"baseline": name}, forms=forms,
                                        variant=name if self.baseline_variant_is_name else None))
        return contenders

    def contenders(self, sparsetir_formats: Mapping[str, str | None] | Sequence[str | None] = (None,),
                   baselines: Sequence[str] | None = None, *, tune_budget_s=None, exclude: Sequence[str] = (),
                   **baseline_keywords) -> list[Contender]:
        """The sparsetir contenders (a list of formats, or ``{name: format or settings}``) followed by the
        baselines (``baseline_keywords``: see :meth:`baseline_contenders`)."""
        if isinstance(sparsetir_formats, Mapping):
            ours = [self.sparsetir_contender(fmt, tune_budget_s=tune_budget_s, name=name)
                    for name, fmt in sparsetir_formats.items()]
        else:
            ours = [self.sparsetir_contender(fmt, tune_budget_s=tune_budget_s) for fmt in sparsetir_formats]
        theirs = self.baseline_contenders(baselines, **baseline_keywords)
        return [c for c in ours + theirs if c.name not in exclude]

    def probe_contender(self, name: str, spec: dict) -> Contender:
        """The contender a probe spec (``Contender.probe``) describes, under ``name``."""
        if "baseline" in spec:
            (contender,) = self.baseline_contenders([spec["baseline"]])
        else:
            contender = self.sparsetir_contender(spec.get("format"), tune_budget_s=spec.get("tune_budget_s"))
        contender.name = name
        return contender

    # ------------------------------------------------------------ the engine

    def check(self, contenders: Sequence[Contender], inputs, case: Case, *, form: str | None = None) -> list[Row]:
        """Prepare every contender (timed) and check its output against the reference.

        A contender that is unavailable, fails to build or to run, or whose output differs from the
        reference beyond its tolerance keeps no ``run``: it is never timed, and its row says why
        (``row.extra`` holds what the comparison found, e.g. how many rows are wrong)."""
        rows = []
        for contender in contenders:
            row = Row(contender.name, "compile" if contender.kind == SPARSETIR else "conversion")
            rows.append(row)
            factory = contender.factory_for(form)
            if contender.error is not None:
                row.error = contender.error
                continue
            if factory is None:
                row.error = f"unavailable: {contender.reason or 'no such variant for this case'}"
                continue
            started = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    if self.quiet:
                        warnings.simplefilter("ignore")
                    run = factory(inputs)
            except Exception as error:  # reported in the row; the other contenders go on
                row.error = self.build_error(error)
                continue
            row.setup_s = time.perf_counter() - started
            row.timings = getattr(run, "timings", None)
            row.extra["run"] = run
            contender.variant = getattr(run, "variant", contender.variant)
            try:
                with warnings.catch_warnings():
                    if self.quiet:
                        warnings.simplefilter("ignore")
                    got = host_array(run())
            except Exception as error:
                row.error = f"failed when called: {type(error).__name__}: {error}"
                continue
            row.error, found = self.mismatch(got, case, run)
            row.extra.update(found)
            if row.error is None:
                row.run = run
        return rows

    def time(self, rows: Sequence[Row], timing, contenders: Sequence[Contender] = ()) -> tuple[str | None, float | None]:
        """Time every checked row together (interleaved, flushed) and fill in ``speedup_vs_best``: the
        fastest reference's median over the row's median. Returns (that reference, its median)."""
        from ..timing import time_interleaved  # noqa: PLC0415 - the timer loads with the libraries

        runnable = {row.contender: row.run for row in rows if row.run is not None}
        if not runnable:
            return None, None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats = time_interleaved(runnable, timing)
        for row in rows:
            row.stats = stats.get(row.contender)
        names = set(self.reference_names(rows, {c.name: c for c in contenders}))
        timed = sorted((row.stats.median, row.contender) for row in rows if row.stats and row.contender in names)
        if not timed:
            return None, None
        best_median, best = timed[0]
        for row in rows:
            if row.stats is not None:
                row.speedup_vs_best = best_median / row.stats.median
        return best, best_median

    def record(self, row: Row, contender: Contender, *, dataset: str, feat: int, provenance: dict,
               device: str = "cpu", shape=None, nnz=None, flops=None, min_bytes=None, experiment: str | None = None,
               op: str | None = None, **case) -> dict:
        """One validated record: the common fields, then :meth:`record_fields`."""
        status, reason = status_of(row)
        times = {key: (row.timings or {}).get(key) for key in ("convert_s", "compile_s", "tune_s")}
        if row.timings is None and self.setup_is_conversion:
            times["convert_s"] = row.setup_s
        times["setup_s"] = row.setup_s
        record = make_record(experiment=experiment or self.name, op=op or self.op or self.name, device=device,
                             dataset=dataset, feat=feat,
                             contender=row.contender, status=status, reason=reason,
                             stats=row.stats.to_dict() if row.stats else None, shape=shape, nnz=nnz,
                             variant=contender.variant, times=times, min_bytes=min_bytes, flops=flops,
                             provenance=provenance)
        record.update(self.record_fields(row, contender, **case))
        return record

    # ------------------------------------------------------------ the workflow's case step

    #: the op whose format registry checks the config's explicit ``sparsetir`` formats (None: no such check)
    config_op: str | None = None

    def check_config(self, section: Mapping) -> None:
        """What the schema cannot check in the family's config section; ``ValueError`` names the problem."""

    def check_names(self, key: str, values, check: Callable) -> None:
        """``check(value)`` for each of ``values`` (a config section's ``key``); its ``ValueError`` comes back
        naming the key: ``config <family>.<key>: <message>``."""
        for value in values:
            try:
                check(value)
            except ValueError as error:
                raise ValueError(f"config {self.name}.{key}: {error}") from None

    def data_needs(self, section: Mapping) -> list[tuple[str, tuple, str, str]]:
        """The real datasets the config section reads, asked before any job (``workflows/scripts/data_preflight.py``):
        ``(name, registry files, user, label)`` each; generated inputs need none (default: none)."""
        return []

    def registry_needs(self, names, user: str | None = None) -> list[tuple[str, tuple, str, str]]:
        """:meth:`data_needs` of the registry's datasets among ``names`` (the others are generated)."""
        from ..data import entry  # noqa: PLC0415
        from ..data import names as registered  # noqa: PLC0415

        known = set(registered())
        return [(name, entry(name).files, user or self.name, name) for name in names if name in known]

    def workflow_unavailable(self, case: Mapping, settings: Mapping) -> list[dict] | None:
        """The records of a case no data route provides, found before torch or TVM load (None: it can run)."""
        return None

    def workflow_case(self, case: Mapping, settings: Mapping, *, timing, device: str, seed: int, threads: int,
                      say: Callable[[str], None]) -> list[dict]:
        """Run one workflow case (``case``: the rule's case keywords, ``settings``: the config section,
        ``timing``: the policy) with the threads already set; its records (``workflows/scripts/family_case.py``)."""
        raise NotImplementedError(f"family {self.name!r} has no workflow case step")

    # ------------------------------------------------------------ the workflow's rules (workflows/rules/families.smk)

    #: how the workflow runs the family: ``"cases"`` (a job per case, then tables and figures), ``"training"``
    #: (``workflows/rules/training.smk``'s rules over the section), None: the family has no workflow target
    workflow: str | None = None
    #: the case job is the rule ``<family>_<case_step>``; it writes ``<family>/<case_folder>/<case>.json``
    case_step = "case"
    case_folder = "records"
    #: a one-thread job per case, the rule ``<family>_<finish_step>``, that turns ``<case_folder>/<case>.json``
    #: into ``records/<case>.json`` (:meth:`workflow_finish`); None: the case job writes the records
    finish_step: str | None = None
    #: the case job runs ``timing.processes`` times, in fresh worker processes (``case_workers.run_step``)
    case_in_workers = True
    #: the figures the figure job draws: output name -> file under ``<family>/figures/``
    figures: Mapping[str, str] = {}
    #: the training experiment of a ``"training"`` workflow (a ``bench.training.Trainer``)
    trainer = None
    #: training experiments a section's key enables: key -> ``bench.training.Trainer`` (their rules are
    #: training.smk's, their results under ``<family>/<key>/``)
    trainings: Mapping[str, object] = {}

    def workflow_cases(self, settings: Mapping) -> dict[str, dict]:
        """The case jobs of the config section ``settings``: file name (a slug) -> the case's keywords."""
        raise NotImplementedError(f"family {self.name!r} declares no workflow cases")

    def workflow_extras(self, settings: Mapping) -> dict[str, Mapping]:
        """Jobs beside the cases, each the rule ``<family>_<name>`` writing ``records/<name>.json``
        (:meth:`workflow_extra`): name -> its settings (none by default)."""
        return {}

    def workflow_extra(self, name: str, settings: Mapping, *, timing, device: str, seed: int, threads: int,
                       say: Callable[[str], None]) -> list[dict]:
        """Run the extra job ``name`` (:meth:`workflow_extras`); its records."""
        raise NotImplementedError(f"family {self.name!r} has no extra job {name!r}")

    def workflow_finish(self, records: list[dict], settings: Mapping) -> list[dict]:
        """The finish step's records from one case's (:attr:`finish_step`)."""
        return records

    def report_module(self):
        """The family's tables and figures: ``sparsetir.bench.report.families.<name>``, whose
        ``workflow_tables(records, outputs, settings)`` and ``workflow_figures(csv, outputs)`` the
        workflow's table and figure jobs call."""
        import importlib  # noqa: PLC0415

        return importlib.import_module(f"{__package__}.report.families.{self.name}")

    # ------------------------------------------------------------ the command line

    def add_arguments(self, parser) -> None:
        """The family's own options of ``python -m sparsetir.bench <family>``."""

    def check_arguments(self, args) -> None:
        """Fill in defaults and check the parsed options; ``ValueError`` names a bad one."""

    def cli_timing(self, args):
        """The timing policy of the command line's options."""
        from ..timing import DEFAULT  # noqa: PLC0415

        return DEFAULT.replace(flush=not args.no_flush, samples=args.samples, max_time_s=args.max_time_s,
                               seed=args.seed)

    def cli_cases(self, args, timing, contenders, say):
        """``(title, run)`` per case the parsed ``args`` ask for; ``run()`` returns the case's records."""
        raise NotImplementedError(f"family {self.name!r} has no command line")

    def main(self, args, timing, contenders, say) -> list[dict]:
        """Run the cases the parsed ``args`` ask for, printing each case's table; return every record."""
        records = []
        for title, run in self.cli_cases(args, timing, contenders, say):
            found = run()
            print(f"\n{title}")
            print(self.format_records(found))
            records += found
        return records

    def headline_text(self, records: Sequence[dict]) -> str:
        """Per sparsetir contender: the geometric mean of its speedups over the best reference."""
        from .report.intervals import geomean  # noqa: PLC0415

        lines = []
        for name in dict.fromkeys(r["contender"] for r in records if r["contender"].startswith(SPARSETIR)):
            values = [self.speedup_of(r) for r in records if r["contender"] == name and r["status"] == "ok"]
            value = geomean(values)
            lines.append(f"{name}: geomean speedup over the best baseline {value:.2f}x over "
                         f"{sum(1 for v in values if v)} case(s)" if value == value else f"{name}: no baseline was timed")
        return "\n".join(lines)

    def format_records(self, records: Sequence[dict]) -> str:
        """A table of records: median, p20, p80 ms, speedup over the best reference, set-up times."""
        from .bounds import rate_percentages  # noqa: PLC0415

        lines = [f"{'case':<28}{'contender':<26}{'median ms':>11}{'p20 ms':>9}{'p80 ms':>9}{'n':>4}{'vs best':>9}"
                 f"{'% FMA':>7}{'% mem':>7}{'convert ms':>11}{'compile s':>10}{'tune s':>8}  note"]
        for record in records:
            stats, times = record.get("stats") or {}, record["times"]
            speedup = self.speedup_of(record)
            cells = (f"{stats['median'] * 1e3:>11.3f}{stats['p20'] * 1e3:>9.3f}{stats['p80'] * 1e3:>9.3f}"
                     f"{stats['n']:>4}" if stats else f"{'-':>11}{'-':>9}{'-':>9}{'-':>4}")
            convert, compile_s, tune_s = times.get("convert_s"), times.get("compile_s"), times.get("tune_s")
            fma, memory = rate_percentages(record)
            lines.append(
                f"{str(record.get('case') or record['dataset'])[:27]:<28}{record['contender'][:25]:<26}{cells}"
                f"{(f'{speedup:.2f}x' if speedup else '-'):>9}"
                f"{(f'{fma:.1f}' if fma else '-'):>7}{(f'{memory:.1f}' if memory else '-'):>7}"
                f"{(f'{convert * 1e3:.1f}' if convert is not None else '-'):>11}"
                f"{(f'{compile_s:.2f}' if compile_s is not None else '-'):>10}"
                f"{(f'{tune_s:.1f}' if tune_s is not None else '-'):>8}  {self.note(record) or ''}")
        return "\n".join(lines)

    def speedup_of(self, record: dict) -> float | None:
        """The record's speedup over the best reference (top level, or in the family's own fields)."""
        return record.get("speedup_vs_best", (record.get(self.name) or {}).get("speedup_vs_best"))

    def note(self, record: dict) -> str | None:
        return record.get("reason")


def register(instance: Family) -> Family:
    """Add a family to the registry (each module of ``sparsetir.bench.families`` calls it once)."""
    if not instance.name:
        raise ValueError(f"{type(instance).__name__} has no name")
    if instance.name in _REGISTRY and type(_REGISTRY[instance.name]) is not type(instance):
        raise ValueError(f"family {instance.name!r} is registered twice")
    _REGISTRY[instance.name] = instance
    return instance


def registered() -> dict[str, Family]:
    """The families registered so far, by name (``sparsetir.bench.families.families`` imports them all)."""
    return dict(sorted(_REGISTRY.items()))
