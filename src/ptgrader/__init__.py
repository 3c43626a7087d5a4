"""ptgrader: the grading service of the book's labs, for instructors and CI (not installed for learners).

The repository has three rooms, and the imports go one way:

- ``ptlabs`` (``src/ptlabs``): the learners' helpers, installed in Colab. It imports neither room below.
- ``ptchecks`` (``src/ptchecks``): the checks the labs' test cells call inside a kernel, and
  ``ptchecks.emit``, which sends outputs out for :mod:`~ptgrader.channel`. The service names it in one place, :data:`ptgrader.contract.CHECKS_MODULE`, and
  never imports it (that would import torch into the grader).
- ``ptgrader`` (this package): runs nbgrader's execution step safely. Its modules:

  - :mod:`~ptgrader.execute`: ``GuardedExecute``, the step ``labs/nbgrader_config.py`` puts in nbgrader,
    and the order of its steps, each in a module of its own: :mod:`~ptgrader.kernel_run` (run the
    cells), :mod:`~ptgrader.receive` (bounded, inert outputs), :mod:`~ptgrader.compare` (the
    reference run and the comparison), :mod:`~ptgrader.score` (the grader's verdicts),
    :mod:`~ptgrader.report` (what is written for the instructor), with :mod:`~ptgrader.cells`;
  - :mod:`~ptgrader.intake`, :mod:`~ptgrader.failsafe`: submission folders checked before nbgrader
    opens them, and one student's failure kept to that student's report;
  - :mod:`~ptgrader.safe_html`: Markdown of the feedback and formgrader pages, sanitised;
  - :mod:`~ptgrader.jail`: the Linux jail each kernel runs in (namespaces, an unprivileged uid, rlimits);
  - :mod:`~ptgrader.syscalls`: the system calls a kernel may not make (a seccomp filter, by libseccomp);
  - :mod:`~ptgrader.kernels`: where a kernel starts (its folder, jail settings, the kernel manager);
  - :mod:`~ptgrader.warm`, ``warm_launcher.py``: the server that forks jailed kernels with torch imported,
    and :mod:`~ptgrader.once_per_server`: work of torch's and onnxscript's it does once for every kernel;
  - :mod:`~ptgrader.contract`: how test cells run through the checks held before student code runs;
  - :mod:`~ptgrader.channel`: outputs sent out of the kernel and compared by the grader;
  - :mod:`~ptgrader.policy`: the code policy read before anything runs (defence in depth);
  - :mod:`~ptgrader.ipython_code`: a cell as the Python IPython runs (read once, for the policy and the source rules);
  - :mod:`~ptgrader.course`, :mod:`~ptgrader.outputs`, :mod:`~ptgrader.repair`: the course record,
    output without active HTML, repairs of stripped metadata;
  - :mod:`~ptgrader.gradebook_engines`: one database engine per gradebook in a grading process;
  - :mod:`~ptgrader.autograde`: ``python -m ptgrader.autograde LAB --jobs N``, and
    ``python -m ptgrader.report LAB`` lists the reports;
  - :mod:`~ptgrader.processes`: ending marked processes, for the tests' notebook runner.

This file imports nothing: ``jail.py`` and ``warm_launcher.py`` run as scripts, and the warm server
imports only what it serves.
"""
