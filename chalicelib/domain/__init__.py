"""The business, with no I/O and no SDK: jobs and their rules, the words the program compares,
errors, object keys and storage events. Imports nothing outside domain/."""
