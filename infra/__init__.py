"""Deployment tools: the stack's outputs into Chalice's stage config, package checks.

Run from the project root with the dev virtualenv; nothing here is deployed to Lambda.
"""
