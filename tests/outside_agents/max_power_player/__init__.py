"""A poke-env Player written as poke-env's documentation shows, and docs/contract.md's
"A poke-env Player": the strongest available move, else a random legal order."""

from poke_env.player import Player


class MaxDamagePlayer(Player):
    def choose_move(self, battle):
        if battle.available_moves:
            best_move = max(battle.available_moves, key=lambda move: move.base_power)
            return self.create_order(best_move)
        return self.choose_random_move(battle)


def getUserPlayerClass(args):
    return MaxDamagePlayer
