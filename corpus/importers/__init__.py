"""Importers behind `harken prepare`: one per corpus layout people already have.

Each importer (`layouts`, `asterisk`) reads its layout and yields `Candidate`s: a key, the
transcript as the source writes it, where the audio is and where its WAV goes. The rest is
shared, so every source is treated alike: `candidates` normalises the transcripts, `audio`
converts the recordings to 16 kHz WAVs, and `report` counts what was dropped and why.
`corpus.prepare` is the command line that runs them in that order and writes the manifests.
"""
