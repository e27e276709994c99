"""The test suite, in tiers (see README "Tests"); a package so its modules import each other as tests.*."""
