/*
 * The cost of one AEAD call for the small messages an encrypted Cask store seals (a record's key and
 * compressed value, 8 bytes of header as associated data), with what Debian 12 ships: libsodium
 * 1.0.18's AES-256-GCM with the key expanded once (what FileCipher calls) and its
 * ChaCha20-Poly1305, and OpenSSL 3's EVP AES-256-GCM with a reused context. Issue 26's speed
 * targets hang on this figure (Benchmarks/README.md, "Encryption").
 *
 *   apt-get install -y libsodium-dev libssl-dev   # when missing
 *   gcc -O2 Benchmarks/aead-cost/aead_cost.c -lsodium -lcrypto -o /tmp/aead_cost && /tmp/aead_cost
 *
 * Prints, per message length, the median of 7 rounds of 1,000,000 calls, in ns per call.
 */
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { ROUNDS = 7, CALLS = 1000000 };

static unsigned char key[32] = {1}, ad[8] = {2}, message[512] = {3}, sealed[512], tag[16];
static crypto_aead_aes256gcm_state aes_state;
static EVP_CIPHER_CTX *evp_seal, *evp_open;

typedef int (*call_t)(unsigned length, unsigned i);

static int sodium_aes_seal(unsigned length, unsigned i) {
    unsigned char nonce[12] = {0};
    nonce[4] = (unsigned char)i; nonce[5] = (unsigned char)(i >> 8); nonce[6] = (unsigned char)(i >> 16);
    return crypto_aead_aes256gcm_encrypt_detached_afternm(sealed, tag, NULL, message, length, ad, sizeof ad, NULL, nonce, &aes_state);
}

static int sodium_aes_open(unsigned length, unsigned i) {
    (void)i;
    unsigned char nonce[12] = {0};
    return crypto_aead_aes256gcm_decrypt_detached_afternm(message, NULL, sealed, length, tag, ad, sizeof ad, nonce, &aes_state);
}

static int sodium_chacha_seal(unsigned length, unsigned i) {
    unsigned char nonce[12] = {0};
    nonce[4] = (unsigned char)i; nonce[5] = (unsigned char)(i >> 8); nonce[6] = (unsigned char)(i >> 16);
    return crypto_aead_chacha20poly1305_ietf_encrypt_detached(sealed, tag, NULL, message, length, ad, sizeof ad, NULL, nonce, key);
}

static int openssl_aes_seal(unsigned length, unsigned i) {
    unsigned char nonce[12] = {0};
    int written;
    nonce[4] = (unsigned char)i; nonce[5] = (unsigned char)(i >> 8); nonce[6] = (unsigned char)(i >> 16);
    EVP_EncryptInit_ex(evp_seal, NULL, NULL, NULL, nonce);
    EVP_EncryptUpdate(evp_seal, NULL, &written, ad, sizeof ad);
    EVP_EncryptUpdate(evp_seal, sealed, &written, message, (int)length);
    EVP_EncryptFinal_ex(evp_seal, sealed + written, &written);
    return EVP_CIPHER_CTX_ctrl(evp_seal, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1 ? 0 : -1;
}

static int openssl_aes_open(unsigned length, unsigned i) {
    (void)i;
    unsigned char nonce[12] = {0};
    int written;
    EVP_DecryptInit_ex(evp_open, NULL, NULL, NULL, nonce);
    EVP_DecryptUpdate(evp_open, NULL, &written, ad, sizeof ad);
    EVP_DecryptUpdate(evp_open, message, &written, sealed, (int)length);
    EVP_CIPHER_CTX_ctrl(evp_open, EVP_CTRL_GCM_SET_TAG, 16, tag);
    return EVP_DecryptFinal_ex(evp_open, message + written, &written) == 1 ? 0 : -1;
}

/* Median ns per call of `call` over ROUNDS rounds; exits if a call fails. */
static double median_ns(call_t call, unsigned length) {
    double rounds[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        int failed = 0;
        double start = now_ns();
        for (unsigned i = 0; i < CALLS; i++) failed |= call(length, i);
        rounds[r] = (now_ns() - start) / CALLS;
        if (failed) { fprintf(stderr, "a call failed at length %u\n", length); exit(1); }
    }
    qsort(rounds, ROUNDS, sizeof rounds[0], by_value);
    return rounds[ROUNDS / 2];
}

int main(void) {
    if (sodium_init() < 0 || !crypto_aead_aes256gcm_is_available()) { fprintf(stderr, "no AES-256-GCM in libsodium here\n"); return 1; }
    crypto_aead_aes256gcm_beforenm(&aes_state, key);
    evp_seal = EVP_CIPHER_CTX_new();
    evp_open = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(evp_seal, EVP_aes_256_gcm(), NULL, key, NULL);
    EVP_DecryptInit_ex(evp_open, EVP_aes_256_gcm(), NULL, key, NULL);
    printf("%-7s %-18s %-18s %-22s %-18s %-18s\n", "length", "sodium AES seal", "sodium AES open", "sodium ChaCha seal", "OpenSSL AES seal", "OpenSSL AES open");
    static const unsigned lengths[] = {16, 32, 48, 64, 77, 96, 112, 128, 144, 200, 256};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        unsigned length = lengths[l];
        double aes_seal = median_ns(sodium_aes_seal, length);
        sodium_aes_seal(length, 0);  /* the message that the opens check, under nonce 0 */
        double aes_open = median_ns(sodium_aes_open, length);
        double chacha = median_ns(sodium_chacha_seal, length);
        double evp_s = median_ns(openssl_aes_seal, length);
        openssl_aes_seal(length, 0);
        double evp_o = median_ns(openssl_aes_open, length);
        printf("%-7u %-18.0f %-18.0f %-22.0f %-18.0f %-18.0f\n", length, aes_seal, aes_open, chacha, evp_s, evp_o);
    }
    return 0;
}
