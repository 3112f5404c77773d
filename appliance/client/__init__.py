"""Clients of a running appliance and tools that prepare what they send; nothing here
imports the store, the engine or the web apps."""
