;; CSTR's rab diphones (Roger, a British RP man; festvox-rablpc16k, a permissive licence) read
;; through CMUdict (festlex-cmu) instead of the OALD lexicon that the Debian voice asks for:
;; festlex-oald is free for non-commercial use only, and training data for a model that anyone
;; may use must not depend on it. CMUdict's radio phones are mapped onto the diphones' mrpa
;; phones, so the voice speaks with American pronunciations in Roger's timbre.
;; corpus/voices.py sets voice-locations' rab_diphone (where scripts/setup.sh unpacked the
;; voice) before it loads this file.

(set! harken_radio_to_mrpa
  '((aa aa) (ae a) (ah uh) (ao oo) (aw au) (ax @) (axr @@) (ay ai) (eh e) (er @@) (ey ei)
    (ih i) (iy ii) (ow ou) (oy oi) (uh u) (uw uu) (hh h) (hv h) (dx t) (el l) (em m)
    (en n) (nx n) (pau #) (brth #)))

(define (harken_mrpa_phone phone)
  (let ((mapped (assoc_string phone harken_radio_to_mrpa)))
    (if mapped (cadr mapped) phone)))

(define (harken_cmu_mrpa_lookup word features)
  "Every word's CMUdict entry (or CMU letter-to-sound guess) in mrpa phones."
  (lex.select "cmu")
  (let ((entry (lex.lookup word features)))
    (lex.select "cmu_mrpa")
    (list (car entry) (cadr entry)
          (mapcar (lambda (syl) (list (mapcar harken_mrpa_phone (car syl)) (cadr syl)))
                  (car (cddr entry))))))

;; the Debian voice file calls (setup_oald_lex) when it loads: ours builds the mapped lexicon
(define (setup_oald_lex)
  (setup_cmu_lex)
  (if (not (member_string "cmu_mrpa" (lex.list)))
      (begin
        (lex.create "cmu_mrpa")
        (lex.set.phoneset "mrpa")
        (lex.set.lts.method 'harken_cmu_mrpa_lookup))))

(load (path-append (cdr (assoc 'rab_diphone voice-locations)) "festvox/rab_diphone.scm"))

(define (voice_rab_cmu)
  "Roger's voice as Debian sets it up, with the mapped lexicon where it selects OALD."
  (let ((select lex.select))
    (set! lex.select
          (lambda (name) (select (if (string-equal name "oald") "cmu_mrpa" name))))
    (voice_rab_diphone)
    (set! lex.select select)))
