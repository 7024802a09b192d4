"""The pays-off feature, in one package: does speculation pay off for one deployment, with which k, and where does it stop?

* :mod:`.command`: ``python -m simulator.paysoff``, its flags and its answer.
* :mod:`.spec`: the pays-off sweep's specification (``data/paysoff.toml``) and the one-deployment spec the command builds.
* :mod:`.runner`: the runs (fixed k, the k schedule, adaptive verification) through the result cache.
* :mod:`.choice`: the best k per load, the recommended schedule and the fallback it must not lose to.
* :mod:`.document`: the schedules document (``recommended_schedules.json``).
* :mod:`.text`: the answer as the terminal prints it, verdict first.

The build's pipeline (:mod:`simulator.pipeline.build`) runs the same sweep over ``data/paysoff.toml``;
the site's page is :mod:`simulator.website.paysoff_page`, which reads the recorded files only.
"""
