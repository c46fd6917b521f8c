"""Custom memory types for tests: a tutoring app's and a support bot's, as a project declares
them in `project-config.yaml`."""

from __future__ import annotations

TUTOR = """\
memory:
  custom_types:
    misconception:
      description: A misunderstanding the student has shown about a topic.
      instructions: Record each misconception the student shows, with its topic.
      heading: Misconceptions
      fields:
        topic: {type: string, required: true}
        severity: {type: string, choices: [minor, major]}
    open_ticket:
      description: A support problem the user reported.
      instructions: Record each problem the user reports with a product.
      reconcile: false
      fields:
        product: {type: string, required: true}
"""
"""`misconception` reconciles (with a heading); `open_ticket` only adds (no heading)."""
