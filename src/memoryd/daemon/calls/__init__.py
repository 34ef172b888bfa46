"""What every tool call goes through, below the tiers: its arguments checked against the tool's own
schema (`validate`) and a resent call answered from what it did (`resent`)."""
