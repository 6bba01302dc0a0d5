"""A poke-env Player with an async choose_move and its own team preview, from docs/contract.md.

At team preview it brings its last three Pokémon, the last one leading, and marks them as
poke-env asks; in battle it plays the move with the highest base power times type effectiveness.
"""

from poke_env.player import Player


class TeamPreviewPlayer(Player):
    async def choose_move(self, battle):
        opponent = battle.opponent_active_pokemon
        if battle.available_moves and opponent is not None:
            best = max(
                battle.available_moves,
                key=lambda move: move.base_power * opponent.damage_multiplier(move),
            )
            return self.create_order(best)
        return self.choose_random_move(battle)

    def teampreview(self, battle):
        members = list(battle.team.values())
        picks = [len(members), len(members) - 1, len(members) - 2]
        for i in picks:
            members[i - 1]._selected_in_teampreview = True
        return "/team " + "".join(str(i) for i in picks)


def getUserPlayerClass(args):
    return TeamPreviewPlayer
