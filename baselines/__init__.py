"""Baselines: one module per library, each computing the ops it has on the same prepared inputs.

A module declares ``VARIANTS = {op: {variant name: factory}}`` (a factory converts its inputs
once and returns a zero-argument callable computing the op) and ``available(op, device) ->
(bool, reason)``. Only ``sparsetir.bench`` imports this package (import-linter checks it).
"""
