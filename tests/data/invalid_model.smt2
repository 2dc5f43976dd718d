; benchmark generated from python API
(set-info :status unknown)
(declare-fun pkt.len () (_ BitVec 64))
(declare-fun pkt.frags () (_ BitVec 64))
(declare-fun map.hit_budget.val ((_ BitVec 16) (_ BitVec 32)) (_ BitVec 8))
(declare-fun pkt () (Array (_ BitVec 64) (_ BitVec 8)))
(declare-fun map.hit_budget.found ((_ BitVec 16)) Bool)
(declare-fun map.port_flags.val ((_ BitVec 16) (_ BitVec 32)) (_ BitVec 8))
(declare-fun map.port_flags.found ((_ BitVec 16)) Bool)
(assert
 (bvuge pkt.len (_ bv0 64)))
(assert
 (bvule pkt.len (_ bv1514 64)))
(assert
 (= pkt.frags (_ bv0 64)))
(assert
 (bvuge pkt.len (_ bv60 64)))
(assert
 (let ((?x47 (concat (select pkt (_ bv35 64)) (select pkt (_ bv34 64)))))
 (let (($x50 (not (not (map.hit_budget.found ?x47)))))
 (let ((?x40 (concat (select pkt (_ bv37 64)) (select pkt (_ bv36 64)))))
 (let (($x58 (and (not (not (map.port_flags.found ?x40))) (= ((_ extract 0 0) (map.port_flags.val ?x40 (_ bv0 32))) (_ bv0 1)) $x50)))
 (let (($x28 (not (and (= (select pkt (_ bv12 64)) (_ bv8 8)) (= (select pkt (_ bv13 64)) (_ bv0 8))))))
 (and (not (not (bvsle (_ bv42 64) pkt.len))) (not $x28) (not (not (= (select pkt (_ bv23 64)) (_ bv17 8)))) (or (and (not (map.port_flags.found ?x40)) $x50) $x58) (not (= ((_ extract 0 0) (map.hit_budget.val ?x47 (_ bv0 32))) (_ bv0 1))))))))))
(check-sat)
