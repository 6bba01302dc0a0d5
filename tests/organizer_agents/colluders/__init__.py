"""Two modules of one team that recognise each other in battle, and one honest module.

Written from docs/contract.md alone: plain classes, nothing imported from this project. The
handshake: both colluders switch on turns 1 and 2; at turn 3 each knows whether the opponent did
the same. ``thrower`` then throws (it uses the move that hurts least);
``favoured`` plays its strongest move against its partner and its weakest against anyone else (a
weak entry whose wins are all given); ``honest`` plays random moves.
"""
