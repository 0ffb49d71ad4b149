"""The report's sections and what they are made of.

- `overview`, `methodology`, `imported`: the sections that belong to no study
- `provenance` what ran where: hosts, services, versions, failures, the run listing
- `prose`      sentences from the statistics, by the one wording rule
- `tables`     HTML rendering of tables for notebooks and the report
- `display`    what a notebook cell shows, with the report's markers
- `answers`    the verdicts a section hands to the report's summary of findings
"""
