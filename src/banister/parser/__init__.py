"""The runtime recogniser for the rule form: an incremental Earley parser over lexemes, lexer contexts
(product DFAs of the lexemes the parser allows next), and the token automaton that ties them to masks."""
