package io.medallion.sql;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * The SQL endpoint's check of a client's password (medallion serve --sql, HiveServer2's CUSTOM
 * authentication): the password must be the one in the serving process's environment, under
 * MEDALLION_SQL_PASSWORD; any user name is taken. The password is read from the environment,
 * not from Spark's settings, which Spark's UI and logs show.
 */
public class PasswordAuthentication implements PasswdAuthenticationProvider {
    static final String VARIABLE = "MEDALLION_SQL_PASSWORD";

    @Override
    public void Authenticate(String user, String password) throws AuthenticationException {
        String expected = System.getenv(VARIABLE);
        if (expected == null || expected.isEmpty()) {
            throw new AuthenticationException(VARIABLE + " is not set where the endpoint runs");
        }
        byte[] given = (password == null ? "" : password).getBytes(StandardCharsets.UTF_8);
        // the same time whatever the password: nothing learned from how long a refusal took
        if (!MessageDigest.isEqual(given, expected.getBytes(StandardCharsets.UTF_8))) {
            throw new AuthenticationException("wrong password for user " + user);
        }
    }
}
