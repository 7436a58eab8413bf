"""Why torch compiled a frame again, and what removes it: the recompiles read
(`recompiles`), each failed guard and its words (`guards`, `guard_words`), where the
user passes the guarded input (`passed_inputs`), and the advice for one recompile
(`advice`, asking the deciders for a mode switch, state the model sets itself and a
library's frame: `mode_advice`, `state_advice`, `library_advice`).
"""
