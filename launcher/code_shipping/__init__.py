"""`code:`: which files of a code dir ship, and the deterministic archive they ship in."""
