"""No import cycles: no module of sparsetir or baselines reaches itself through its imports, counting
the imports inside functions (grimp reads every import statement). A cycle means a concept sits in the
wrong module (docs/architecture.md); `make lint` runs this test beside import-linter's contracts."""

import grimp


def test_no_module_imports_itself_through_others():
    graph = grimp.build_graph("sparsetir", "baselines", cache_dir=None)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported != importer and graph.chain_exists(imported, importer):
                chain = graph.find_shortest_chain(imported, importer)
                cycles.append(" -> ".join((importer, *chain)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
